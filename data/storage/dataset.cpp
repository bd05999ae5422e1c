// Implementation of DatasetReader (see dataset.h for the checks made at open).
#include "data/storage/dataset.h"

#include <filesystem>

#include "base/error.h"
#include "base/utf8.h"
#include "data/storage/schema.h"

namespace vlm {

namespace sc = schema;

DatasetReader::DatasetReader(const std::string& path) : path_(path) {
  H5Lock lock(h5_mutex());
  file_ = h5_open_file(path);
  const std::string fmt = h5_read_attr_string(file_, path, sc::kAttrFormat);
  VLM_REQUIRE(fmt == sc::kFormat, path, ": root attribute 'format' is '", fmt, "' (expected '",
              sc::kFormat, "')");
  version_ = h5_read_attr_int(file_, path, sc::kAttrVersion);
  VLM_REQUIRE(version_ >= sc::kMinVersion && version_ <= sc::kVersion, path, ": unknown schema version ", version_,
              " (this build reads versions ", sc::kMinVersion, " to ", sc::kVersion, ")");
  const std::string storage = h5_read_attr_string(file_, path, sc::kAttrStorage);
  VLM_REQUIRE(storage == sc::kStorageEncoded || storage == sc::kStorageRaw, path,
              ": root attribute 'image_storage' is '", storage, "' (expected encoded or raw)");
  raw_ = storage == sc::kStorageRaw;
  if (h5_has_attr(file_, sc::kAttrSource)) source_ = h5_read_attr_string(file_, path, sc::kAttrSource);

  std::vector<int64_t> dims;
  if (raw_) {
    images_ = h5_open_dataset(file_, path, sc::kImRaw, H5Elem::U8, 4, &dims);
    VLM_REQUIRE(dims[0] <= sc::kMaxImages && dims[1] >= 1 && dims[1] <= sc::kMaxSide &&
                    dims[2] >= 1 && dims[2] <= sc::kMaxSide &&
                    (dims[3] == 1 || dims[3] == 3 || dims[3] == 4),
                path, ": dataset ", sc::kImRaw, " has an implausible shape");
    n_images_ = dims[0];
    raw_h_ = int(dims[1]), raw_w_ = int(dims[2]), raw_c_ = int(dims[3]);
    VLM_REQUIRE(int64_t(raw_h_) * raw_w_ * raw_c_ <= sc::kMaxImageBytes, path, ": dataset ",
                sc::kImRaw, " images are too large");
  } else {
    images_ = h5_open_dataset(file_, path, sc::kImEncoded, H5Elem::U8, 1, &dims);
    std::vector<int64_t> odims;
    h5_open_dataset(file_, path, sc::kImOffsets, H5Elem::I64, 1, &odims);
    VLM_REQUIRE(odims[0] >= 1 && odims[0] - 1 <= sc::kMaxImages, path, ": dataset ",
                sc::kImOffsets, " has an implausible length ", odims[0]);
    n_images_ = odims[0] - 1;
    img_off_ = read_offsets(sc::kImOffsets, n_images_ + 1, images_, sc::kImEncoded, sc::kMaxImageBytes);
  }
  heights_ = read_i32(sc::kImHeight, n_images_);
  widths_ = read_i32(sc::kImWidth, n_images_);
  channels_ = read_i32(sc::kImChannels, n_images_);
  for (int64_t i = 0; i < n_images_; ++i) {
    const size_t k = size_t(i);
    VLM_REQUIRE(heights_[k] >= 1 && heights_[k] <= sc::kMaxSide && widths_[k] >= 1 &&
                    widths_[k] <= sc::kMaxSide && channels_[k] >= 1 && channels_[k] <= 4,
                path, ": image ", i, " has an implausible size ", heights_[k], "x", widths_[k], "x",
                channels_[k], " in /images/{height,width,channels}");
    VLM_REQUIRE(!raw_ || (heights_[k] == raw_h_ && widths_[k] == raw_w_ && channels_[k] == raw_c_), path, ": image ",
                i, " has the size ", heights_[k], "x", widths_[k], "x", channels_[k],
                " in /images/{height,width,channels}, but ", sc::kImRaw, " stores ", raw_h_, "x", raw_w_, "x", raw_c_);
  }
  if (h5_exists(file_, sc::kImLabel)) {
    labels_ = read_i32(sc::kImLabel, n_images_);
    class_names_ = read_class_names("images");
    check_labels(labels_, int64_t(class_names_.size()), sc::kImLabel, "/images@class_names");
  }

  text_ = h5_open_dataset(file_, path, sc::kCapText, H5Elem::U8, 1, nullptr);
  cap_image_ = h5_read_i64(file_, path, sc::kCapImage, sc::kMaxCaptions);
  const int64_t m = int64_t(cap_image_.size());
  text_off_ = read_offsets(sc::kCapTextOffsets, m + 1, text_, sc::kCapText, sc::kMaxCaptionBytes);
  for (int64_t j = 0; j < m; ++j)
    VLM_REQUIRE(cap_image_[size_t(j)] >= 0 && cap_image_[size_t(j)] < n_images_, path, ": dataset ",
                sc::kCapImage, " entry ", j, " names image ", cap_image_[size_t(j)], " of ", n_images_);
  if (h5_exists(file_, sc::kCapPrompt)) {
    prompt_ = h5_open_dataset(file_, path, sc::kCapPrompt, H5Elem::U8, 1, nullptr);
    prompt_off_ = read_offsets(sc::kCapPromptOffsets, m + 1, prompt_, sc::kCapPrompt, sc::kMaxCaptionBytes);
  }
  if (h5_exists(file_, sc::kCapTokens)) {
    tokens_ = h5_open_dataset(file_, path, sc::kCapTokens, H5Elem::I32, 1, nullptr);
    tok_off_ = read_offsets(sc::kCapTokenOffsets, m + 1, tokens_, sc::kCapTokens, sc::kMaxCaptionTokens);
    H5Id g = h5_open_group(file_, "captions");
    if (h5_has_attr(g, sc::kAttrTokenizer)) tokenizer_name_ = h5_read_attr_string(g, path, sc::kAttrTokenizer);
  }
  read_caption_boxes_and_labels();
  const char* names[3] = {sc::kSplitTrain, sc::kSplitVal, sc::kSplitTest};
  for (int s = 0; s < 3; ++s) {
    splits_[s] = h5_read_i64(file_, path, names[s], n_images_);
    for (int64_t i : splits_[s])
      VLM_REQUIRE(i >= 0 && i < n_images_, path, ": dataset ", names[s], " names image ", i, " of ",
                  n_images_);
  }
  check_splits(names);
}

std::vector<std::string> DatasetReader::read_class_names(const std::string& group) {
  std::vector<std::string> names;
  H5Id g = h5_open_group(file_, group);
  if (!h5_has_attr(g, sc::kAttrClassNames)) return names;
  const std::string all = h5_read_attr_string(g, path_, sc::kAttrClassNames);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t nl = all.find('\n', pos);
    if (nl == std::string::npos) nl = all.size();
    names.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  require_utf8(all, cat(path_, ": attribute /", group, "@", sc::kAttrClassNames));
  return names;
}

void DatasetReader::read_caption_boxes_and_labels() {
  const int64_t m = num_captions();
  for (const char* ds : {sc::kCapBox, sc::kCapLabel})
    VLM_REQUIRE(version_ >= sc::kVersionBoxes || !h5_exists(file_, ds), path_, ": dataset ", ds,
                " needs schema version ", sc::kVersionBoxes, " (the file says version ", version_, ")");
  if (h5_exists(file_, sc::kCapBox)) {
    std::vector<int64_t> dims;
    H5Id ds = h5_open_dataset(file_, path_, sc::kCapBox, H5Elem::I32, 2, &dims);
    VLM_REQUIRE(dims[0] == m && dims[1] == 4, path_, ": dataset ", sc::kCapBox, " has shape [", dims[0], ",", dims[1],
                "] (expected [", m, ",4]: one x0 y0 x1 y1 box per caption)");
    h5_check_whole_read(ds, path_, sc::kCapBox, uint64_t(m) * 16);
    cap_boxes_.resize(size_t(m) * 4);
    if (m > 0) h5_read_rows(ds, H5Elem::I32, 0, m, 4, cap_boxes_.data());
    for (int64_t j = 0; j < m; ++j) {
      const int32_t* b = cap_boxes_.data() + 4 * j;
      const size_t i = size_t(cap_image_[size_t(j)]);
      VLM_REQUIRE(0 <= b[0] && b[0] < b[2] && b[2] <= widths_[i] && 0 <= b[1] && b[1] < b[3] && b[3] <= heights_[i],
                  path_, ": dataset ", sc::kCapBox, " entry ", j, " (", b[0], ", ", b[1], ", ", b[2], ", ", b[3],
                  ") is not a box inside image ", i, " (", widths_[i], " x ", heights_[i],
                  "; expected 0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height)");
    }
  }
  if (h5_exists(file_, sc::kCapLabel)) {
    cap_labels_ = read_i32(sc::kCapLabel, m);
    cap_class_names_ = read_class_names("captions");
    check_labels(cap_labels_, int64_t(cap_class_names_.size()), sc::kCapLabel, "/captions@class_names");
  }
}

void DatasetReader::check_labels(const std::vector<int32_t>& labels, int64_t n_names, const char* dataset,
                                 const char* names_attr) const {
  for (size_t j = 0; j < labels.size(); ++j)
    VLM_REQUIRE(labels[j] >= 0 && (n_names == 0 || labels[j] < n_names), path_, ": dataset ", dataset, " entry ", j,
                " is ", labels[j],
                n_names ? cat(" (expected 0..", n_names - 1, ", one of the class names of ", names_attr, ")")
                        : std::string(" (expected >= 0)"));
}

// Each split ascending without repeats, and no image in two splits (schema: pairwise
// disjoint), by merging the sorted lists: no memory beyond them.
void DatasetReader::check_splits(const char* const names[3]) const {
  for (int s = 0; s < 3; ++s)
    for (size_t k = 1; k < splits_[s].size(); ++k)
      VLM_REQUIRE(splits_[s][k - 1] < splits_[s][k], path_, ": dataset ", names[s], " is not ascending at entry ", k,
                  " (", splits_[s][k - 1], " then ", splits_[s][k], "; expected ascending image indices, each once)");
  for (int a = 0; a < 3; ++a)
    for (int b = a + 1; b < 3; ++b) {
      const std::vector<int64_t>&x = splits_[a], &y = splits_[b];
      for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
        VLM_REQUIRE(x[i] != y[j], path_, ": image ", x[i], " is in both ", names[a], " and ", names[b],
                    " (expected disjoint splits)");
        x[i] < y[j] ? ++i : ++j;
      }
    }
}

CaptionBox DatasetReader::box(int64_t j) const {
  VLM_ASSERT(has_boxes() && j >= 0 && j < num_captions(), "box(", j, ")");
  const int32_t* b = cap_boxes_.data() + 4 * j;
  return {b[0], b[1], b[2], b[3]};
}

std::vector<int64_t> DatasetReader::read_offsets(const std::string& ds, int64_t n_plus_1,
                                                 const H5Id& bytes, const std::string& bytes_name,
                                                 int64_t max_one) {
  std::vector<int64_t> off = h5_read_i64(file_, path_, ds, n_plus_1, n_plus_1);
  const int64_t total = h5_extent(bytes)[0];
  VLM_REQUIRE(off[0] == 0, path_, ": dataset ", ds, " must start at 0");
  for (size_t k = 1; k < off.size(); ++k) {
    // off[k - 1] >= 0 here, so the difference cannot overflow once off[k] >= off[k - 1].
    VLM_REQUIRE(off[k] >= off[k - 1], path_, ": dataset ", ds, " entry ", k - 1, " runs backwards (from ",
                off[k - 1], " to ", off[k], ")");
    const int64_t len = off[k] - off[k - 1];
    VLM_REQUIRE(len <= max_one, path_, ": dataset ", ds, " entry ", k - 1, " has length ", len, " (allowed 0..",
                max_one, ")");
  }
  VLM_REQUIRE(off.back() == total, path_, ": dataset ", ds, " ends at ", off.back(), " but ",
              bytes_name, " holds ", total, " elements");
  return off;
}

std::vector<int32_t> DatasetReader::read_i32(const std::string& ds, int64_t n) {
  return h5_read_i32(file_, path_, ds, n, n);
}

std::string DatasetReader::tokenizer_path() const {
  namespace fs = std::filesystem;
  if (tokenizer_name_.empty()) return "";
  const fs::path name(tokenizer_name_);
  std::error_code ec;
  if (name.is_relative()) {
    const fs::path beside = fs::path(path_).parent_path() / name;
    if (fs::is_regular_file(beside, ec)) return beside.lexically_normal().string();
  }
  return fs::is_regular_file(name, ec) ? name.string() : "";
}

ImageInfo DatasetReader::image_info(int64_t i) const {
  VLM_ASSERT(i >= 0 && i < n_images_, "image index ", i, " out of range");
  return {heights_[size_t(i)], widths_[size_t(i)], channels_[size_t(i)]};
}

int64_t DatasetReader::image_bytes(int64_t i) const {
  VLM_ASSERT(i >= 0 && i < n_images_, "image index ", i, " out of range");
  if (raw_) return int64_t(raw_h_) * raw_w_ * raw_c_;
  return img_off_[size_t(i) + 1] - img_off_[size_t(i)];
}

std::vector<uint8_t> DatasetReader::image_data(int64_t i) const {
  std::vector<uint8_t> out;
  image_data(i, out);
  return out;
}

void DatasetReader::image_data(int64_t i, std::vector<uint8_t>& out) const {
  out.resize(size_t(image_bytes(i)));
  if (raw_)
    h5_read_rows(images_, H5Elem::U8, i, 1, int64_t(out.size()), out.data());
  else
    h5_read_rows(images_, H5Elem::U8, img_off_[size_t(i)], int64_t(out.size()), 1, out.data());
}

std::string DatasetReader::read_text(const H5Id& ds, const std::vector<int64_t>& off, int64_t j,
                                     const char* name) const {
  VLM_ASSERT(j >= 0 && j < num_captions(), "caption index ", j, " out of range");
  std::string s(size_t(off[size_t(j) + 1] - off[size_t(j)]), '\0');
  h5_read_rows(ds, H5Elem::U8, off[size_t(j)], int64_t(s.size()), 1, s.data());
  if (utf8_invalid_at(s) != kUtf8Valid) require_utf8(s, cat(path_, ": dataset ", name, " entry ", j, " (caption ", j, ")"));
  return s;
}

std::string DatasetReader::caption(int64_t j) const { return read_text(text_, text_off_, j, sc::kCapText); }

std::string DatasetReader::prompt(int64_t j) const {
  return prompt_off_.empty() ? std::string() : read_text(prompt_, prompt_off_, j, sc::kCapPrompt);
}

std::vector<int32_t> DatasetReader::tokens(int64_t j) const {
  VLM_ASSERT(has_tokens() && j >= 0 && j < num_captions(), "tokens(", j, ")");
  std::vector<int32_t> t(size_t(tok_off_[size_t(j) + 1] - tok_off_[size_t(j)]));
  h5_read_rows(tokens_, H5Elem::I32, tok_off_[size_t(j)], int64_t(t.size()), 1, t.data());
  return t;
}

const std::vector<int64_t>& DatasetReader::split(const std::string& name) const {
  if (name == "train") return splits_[0];
  if (name == "val") return splits_[1];
  VLM_REQUIRE(name == "test", "unknown split '", name, "' (expected train, val, test or all)");
  return splits_[2];
}

std::vector<int64_t> DatasetReader::split_captions(const std::string& name) const {
  std::vector<int64_t> out;
  if (name == "all") {
    for (int64_t j = 0; j < num_captions(); ++j) out.push_back(j);
    return out;
  }
  std::vector<uint8_t> in(size_t(n_images_), 0);
  for (int64_t i : split(name)) in[size_t(i)] = 1;
  for (int64_t j = 0; j < num_captions(); ++j)
    if (in[size_t(cap_image_[size_t(j)])]) out.push_back(j);
  return out;
}

}  // namespace vlm

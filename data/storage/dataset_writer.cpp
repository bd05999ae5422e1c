// Implementation of DatasetWriter (see dataset_writer.h).
#include "data/storage/dataset_writer.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/utf8.h"
#include "data/storage/schema.h"

namespace vlm {

static constexpr size_t kFlushBytes = size_t(4) << 20;

std::string tokenizer_name_in(const std::string& dataset, const std::string& tokenizer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path tok = fs::absolute(tokenizer, ec).lexically_normal();
  const fs::path dir = fs::absolute(dataset, ec).lexically_normal().parent_path();
  const fs::path rel = tok.lexically_relative(dir);
  return (ec || rel.empty() ? tok : rel).generic_string();
}

static std::string join_lines(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? "\n" : "") + names[i];
  return s;
}

DatasetWriter DatasetWriter::encoded(const std::string& path) {
  DatasetWriter w;
  w.path_ = path;
  w.out_ = std::make_unique<AtomicFile>(path);
  w.file_ = h5_create_file(w.out_->temp_path());
  H5Id g = h5_create_group(w.file_, "images");
  // Encoded bytes are already compressed (PNG/JPEG): chunked for appending, no gzip.
  w.img_ = std::make_unique<H5Appender>(g, "encoded", H5Elem::U8, std::vector<int64_t>{},
                                        int64_t(1) << 20, 0);
  return w;
}

DatasetWriter DatasetWriter::raw(const std::string& path, int h, int w, int c) {
  VLM_REQUIRE(h > 0 && w > 0 && (c == 1 || c == 3 || c == 4), path, ": bad raw image size ", h,
              "x", w, "x", c);
  DatasetWriter wr;
  wr.path_ = path;
  wr.raw_ = true;
  wr.h_ = h, wr.w_ = w, wr.c_ = c;
  wr.out_ = std::make_unique<AtomicFile>(path);
  wr.file_ = h5_create_file(wr.out_->temp_path());
  H5Id g = h5_create_group(wr.file_, "images");
  // Raw pixels compress well (Fashion-MNIST ~2x): gzip 4 on chunks of ~32 KiB, small
  // enough that a random read inflates little more than the image it wants.
  const int64_t per = int64_t(h) * w * c;
  const int64_t rows = std::max<int64_t>(1, (int64_t(32) << 10) / per);
  wr.img_ = std::make_unique<H5Appender>(g, "raw", H5Elem::U8, std::vector<int64_t>{h, w, c},
                                         rows, 4);
  return wr;
}

DatasetWriter::DatasetWriter(DatasetWriter&&) noexcept = default;
DatasetWriter::~DatasetWriter() = default;

void DatasetWriter::flush_images() {
  if (img_buf_.empty()) return;
  img_->append(img_buf_.data(), raw_ ? img_buf_rows_ : int64_t(img_buf_.size()));
  img_buf_.clear();
  img_buf_rows_ = 0;
}

int64_t DatasetWriter::add_encoded(const uint8_t* bytes, size_t n, int h, int w, int c) {
  VLM_ASSERT(!raw_ && !finished_, "add_encoded on a raw or finished writer");
  VLM_REQUIRE(int64_t(n) <= schema::kMaxImageBytes, path_, ": image ", n_images_, " has ", n,
              " bytes (limit ", schema::kMaxImageBytes, ")");
  img_buf_.insert(img_buf_.end(), bytes, bytes + n);
  offsets_.push_back(offsets_.back() + int64_t(n));
  heights_.push_back(h), widths_.push_back(w), channels_.push_back(c);
  if (img_buf_.size() >= kFlushBytes) flush_images();
  return n_images_++;
}

int64_t DatasetWriter::add_raw(const uint8_t* pixels) {
  VLM_ASSERT(raw_ && !finished_, "add_raw on an encoded or finished writer");
  const size_t per = size_t(h_) * size_t(w_) * size_t(c_);
  img_buf_.insert(img_buf_.end(), pixels, pixels + per);
  ++img_buf_rows_;
  heights_.push_back(h_), widths_.push_back(w_), channels_.push_back(c_);
  if (img_buf_.size() >= kFlushBytes) flush_images();
  return n_images_++;
}

void DatasetWriter::add_caption(int64_t image, std::string_view text, std::string_view prompt,
                                const std::vector<int32_t>* tokens) {
  VLM_ASSERT(image >= 0 && image < n_images_, "caption for unknown image ", image);
  for (const auto& [t, what] : {std::pair{text, "caption"}, std::pair{prompt, "prompt"}}) {
    if (int64_t(t.size()) <= schema::kMaxCaptionBytes && utf8_invalid_at(t) == kUtf8Valid) continue;
    const std::string where = cat(path_, ": the ", what, " of caption ", num_captions(), " (image ", image, ")");
    VLM_REQUIRE(int64_t(t.size()) <= schema::kMaxCaptionBytes, where, " is longer than ", schema::kMaxCaptionBytes,
                " bytes");
    require_utf8(t, where);
  }
  VLM_ASSERT(cap_image_.empty() || (tokens != nullptr) == (tok_off_.size() > 1), "token ids for some captions only");
  if (tokens) {
    VLM_REQUIRE(int64_t(tokens->size()) <= schema::kMaxCaptionTokens, path_, ": caption of image ", image, " has ",
                tokens->size(), " tokens (limit ", schema::kMaxCaptionTokens, ")");
    tokens_.insert(tokens_.end(), tokens->begin(), tokens->end());
    tok_off_.push_back(int64_t(tokens_.size()));
  }
  text_.insert(text_.end(), text.begin(), text.end());
  text_off_.push_back(int64_t(text_.size()));
  prompt_.insert(prompt_.end(), prompt.begin(), prompt.end());
  prompt_off_.push_back(int64_t(prompt_.size()));
  cap_image_.push_back(image);
}

void DatasetWriter::set_split(const std::string& path, std::vector<int64_t> images) {
  std::sort(images.begin(), images.end());
  for (auto& s : splits_)
    if (s.first == path) {
      s.second = std::move(images);
      return;
    }
  splits_.emplace_back(path, std::move(images));
}

void DatasetWriter::set_labels(std::vector<int32_t> labels, const std::vector<std::string>& names) {
  labels_ = std::move(labels);
  class_names_ = join_lines(names);
}

void DatasetWriter::set_caption_labels(std::vector<int32_t> labels, const std::vector<std::string>& names) {
  for (int32_t l : labels) VLM_ASSERT(l >= 0 && size_t(l) < names.size(), "caption label ", l, " of ", names.size());
  cap_labels_ = std::move(labels);
  cap_class_names_ = join_lines(names);
}

void DatasetWriter::finish() {
  VLM_ASSERT(!finished_, "finish() twice");
  flush_images();
  img_->close();
  H5Lock lock(h5_mutex());
  {
    H5Id g = h5_open_group(file_, "images");
    if (!raw_) h5_write_1d(g, "offsets", H5Elem::I64, offsets_.data(), int64_t(offsets_.size()), true);
    h5_write_1d(g, "height", H5Elem::I32, heights_.data(), n_images_, true);
    h5_write_1d(g, "width", H5Elem::I32, widths_.data(), n_images_, true);
    h5_write_1d(g, "channels", H5Elem::I32, channels_.data(), n_images_, true);
    if (!labels_.empty()) {
      VLM_ASSERT(int64_t(labels_.size()) == n_images_, "one label per image");
      h5_write_1d(g, "label", H5Elem::I32, labels_.data(), n_images_, true);
      h5_write_attr_string(g, schema::kAttrClassNames, class_names_);
    }
  }
  {
    H5Id g = h5_create_group(file_, "captions");
    const int64_t m = int64_t(cap_image_.size());
    h5_write_1d(g, "text", H5Elem::U8, text_.data(), int64_t(text_.size()), true);
    h5_write_1d(g, "text_offsets", H5Elem::I64, text_off_.data(), m + 1, true);
    h5_write_1d(g, "image", H5Elem::I64, cap_image_.data(), m, true);
    if (prompt_off_.back() > 0) {
      h5_write_1d(g, "prompt", H5Elem::U8, prompt_.data(), int64_t(prompt_.size()), true);
      h5_write_1d(g, "prompt_offsets", H5Elem::I64, prompt_off_.data(), m + 1, true);
    }
    if (int64_t(tok_off_.size()) == m + 1 && m > 0) {
      h5_write_1d(g, "tokens", H5Elem::I32, tokens_.data(), int64_t(tokens_.size()), true);
      h5_write_1d(g, "token_offsets", H5Elem::I64, tok_off_.data(), m + 1, true);
      h5_write_attr_string(g, schema::kAttrTokenizer, tokenizer_);
    }
    if (!cap_boxes_.empty()) {
      VLM_ASSERT(int64_t(cap_boxes_.size()) == 4 * m, cap_boxes_.size() / 4, " caption boxes for ", m, " captions");
      for (int64_t j = 0; j < m; ++j) {
        const int32_t* b = cap_boxes_.data() + 4 * j;
        const size_t i = size_t(cap_image_[size_t(j)]);
        VLM_ASSERT(0 <= b[0] && b[0] < b[2] && b[2] <= widths_[i] && 0 <= b[1] && b[1] < b[3] && b[3] <= heights_[i],
                   "box of caption ", j, " is not inside its image");
      }
      h5_write_array(g, "box", H5Elem::I32, cap_boxes_.data(), {m, 4});
    }
    if (!cap_labels_.empty()) {
      VLM_ASSERT(int64_t(cap_labels_.size()) == m, cap_labels_.size(), " caption labels for ", m, " captions");
      h5_write_1d(g, "label", H5Elem::I32, cap_labels_.data(), m, true);
      h5_write_attr_string(g, schema::kAttrClassNames, cap_class_names_);
    }
  }
  {
    H5Id g = h5_create_group(file_, "splits");
    for (const char* name : {schema::kSplitTrain, schema::kSplitVal, schema::kSplitTest}) {
      std::vector<int64_t> idx;
      for (auto& s : splits_)
        if (s.first == name) idx = s.second;
      for (int64_t i : idx) VLM_ASSERT(i >= 0 && i < n_images_, "split index out of range");
      h5_write_1d(g, std::string(name).substr(8), H5Elem::I64, idx.data(), int64_t(idx.size()), true);
    }
  }
  h5_write_attr_string(file_, schema::kAttrFormat, schema::kFormat);
  const bool v2 = !cap_boxes_.empty() || !cap_labels_.empty();
  h5_write_attr_int(file_, schema::kAttrVersion, v2 ? schema::kVersionBoxes : schema::kMinVersion);
  h5_write_attr_string(file_, schema::kAttrStorage, raw_ ? schema::kStorageRaw : schema::kStorageEncoded);
  h5_write_attr_string(file_, schema::kAttrSource, source_);
  img_.reset();
  h5_close_file(file_);
  out_->commit();
  finished_ = true;
}

void rewrite_caption_tokens(const std::string& path, const std::vector<int32_t>& tokens,
                            const std::vector<int64_t>& offsets, const std::string& tokenizer) {
  VLM_ASSERT(!offsets.empty() && offsets.front() == 0 && offsets.back() == int64_t(tokens.size()),
             "token offsets must run from 0 to the number of tokens");
  AtomicFile out(path);
  std::error_code ec;
  std::filesystem::copy_file(path, out.temp_path(), std::filesystem::copy_options::overwrite_existing, ec);
  VLM_REQUIRE(!ec, path, ": cannot copy it to write the tokens (", ec.message(), ")");
  {
    H5Lock lock(h5_mutex());
    H5Id file = h5_open_file_rw(out.temp_path());
    {
      H5Id g = h5_open_group(file, "captions");
      for (const char* ds : {"tokens", "token_offsets"}) h5_unlink(g, ds);
      h5_delete_attr(g, schema::kAttrTokenizer);
      h5_write_1d(g, "tokens", H5Elem::I32, tokens.data(), int64_t(tokens.size()), true);
      h5_write_1d(g, "token_offsets", H5Elem::I64, offsets.data(), int64_t(offsets.size()), true);
      h5_write_attr_string(g, schema::kAttrTokenizer, tokenizer);
    }
    h5_close_file(file);
  }
  out.commit();
}

}  // namespace vlm

// Helpers shared by the converters (see converters.h): splits, progress, the checked
// image and caption adders and the image policy.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/file_read.h"
#include "base/utf8.h"
#include "data/convert/converters.h"
#include "data/image/image_pipeline.h"
#include "data/load/sampler.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"
#include "data/text/tokenizer.h"

namespace vlm {

namespace fs = std::filesystem;

Splits random_splits(int64_t n, const BuildOptions& opt) {
  VLM_REQUIRE(opt.val_fraction >= 0 && opt.test_fraction >= 0 && opt.val_fraction + opt.test_fraction < 1,
              "val_fraction + test_fraction must be in [0, 1)");
  Splits s;
  if (n > 0) {
    const std::vector<int64_t> p = DistributedSampler::permutation(n, opt.seed, -1);
    const int64_t nv = int64_t(std::floor(double(n) * opt.val_fraction));
    const int64_t nt = int64_t(std::floor(double(n) * opt.test_fraction));
    for (int64_t k = 0; k < n; ++k) (k < nv ? s.val : k < nv + nt ? s.test : s.train).push_back(p[size_t(k)]);
  }
  for (auto* v : {&s.train, &s.val, &s.test}) std::sort(v->begin(), v->end());
  return s;
}

void write_random_splits(DatasetWriter& w, int64_t n, const BuildOptions& opt) {
  Splits s = random_splits(n, opt);
  w.set_split(schema::kSplitTrain, std::move(s.train));
  w.set_split(schema::kSplitVal, std::move(s.val));
  w.set_split(schema::kSplitTest, std::move(s.test));
}

void build_progress(const BuildOptions& opt, const char* what, int64_t i, int64_t n) {
  if (!opt.progress || n <= 0) return;
  const int64_t step = std::max<int64_t>(1, n / 10);
  if (i == n || i % step == 0)
    std::printf("[build] %s: %lld/%lld (%d%%)\n", what, (long long)i, (long long)n,
                 int(100 * i / n));
}

QuietStderr::QuietStderr() {
  std::fflush(stderr);
  saved_ = ::dup(2);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved_ >= 0 && null >= 0) ::dup2(null, 2);
  if (null >= 0) ::close(null);
}

QuietStderr::~QuietStderr() {
  if (saved_ < 0) return;
  std::fflush(stderr);
  ::dup2(saved_, 2);
  ::close(saved_);
}

bool add_encoded_file(DatasetWriter& w, const std::string& path, int64_t* index) {
  auto skip = [&](const std::string& why) {
    std::printf("[build] warning: %s: %s; skipped\n", path.c_str(), why.c_str());
    return false;
  };
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return skip("not found");
  if (!fs::is_regular_file(st)) return skip("not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > uintmax_t(schema::kMaxImageBytes))
    return skip(cat("larger than the limit of ", schema::kMaxImageBytes, " bytes"));
  std::string bytes;
  try {
    bytes = read_file_bounded(path, uint64_t(schema::kMaxImageBytes), "image file");
  } catch (const UserError& e) {
    return skip(e.what());
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  // Decoding validates the file and gives the size recorded in /images/{height,width}.
  RgbImage m;
  {
    QuietStderr quiet;
    m = decode_rgb(p, bytes.size());
  }
  if (m.empty()) return skip("cannot decode as a PNG or JPEG image");
  *index = w.add_encoded(p, bytes.size(), m.height, m.width, 3);
  return true;
}

std::string image_path(const std::string& root, const std::string& rel, const std::string& where,
                       const BuildOptions& opt) {
  VLM_REQUIRE(!rel.empty(), where, ": empty image path");
  VLM_REQUIRE(rel.find('\0') == std::string::npos, where, ": the image path holds a NUL character (\\u0000)");
  fs::path base = fs::absolute(root.empty() ? fs::path(".") : fs::path(root)).lexically_normal();
  if (!base.has_filename() && base.has_parent_path() && base != base.root_path()) base = base.parent_path();  // "a/b/" -> "a/b"
  const fs::path p = (fs::path(rel).is_absolute() ? fs::path(rel) : base / rel).lexically_normal();
  if (!opt.allow_outside_images) {
    const fs::path inside = p.lexically_relative(base);
    VLM_REQUIRE(!inside.empty() && *inside.begin() != "..", where, ": image path '", rel,
                "' leaves the image folder ", base.string(),
                " (paths stay inside it; --data.allow_outside_images allows others)");
  }
  return p.string();
}

BuildReport finish_labelled_build(DatasetWriter& w, std::vector<int32_t> boxes, std::vector<int32_t> labels,
                                  const std::vector<std::string>& class_names, const Splits& splits) {
  BuildReport rep;
  rep.images = w.num_images();
  rep.captions = w.num_captions();
  w.set_caption_boxes(std::move(boxes));
  w.set_caption_labels(std::move(labels), class_names);
  w.set_split(schema::kSplitTrain, splits.train);
  w.set_split(schema::kSplitVal, splits.val);
  w.set_split(schema::kSplitTest, splits.test);
  w.finish();
  return rep;
}

void add_caption_checked(DatasetWriter& w, int64_t image, std::string_view caption, std::string_view prompt,
                         const std::string& where, const BuildOptions& opt) {
  for (const auto& [text, what] : {std::pair{caption, "caption"}, std::pair{prompt, "prompt"}}) {
    VLM_REQUIRE(int64_t(text.size()) <= schema::kMaxCaptionBytes, where, ": ", what, " of ", text.size(),
                " bytes is longer than the limit of ", schema::kMaxCaptionBytes);
    const size_t bad = utf8_invalid_at(text);
    VLM_REQUIRE(bad == kUtf8Valid, where, ": ", what, " is not valid UTF-8 (byte ", bad,
                "); the dataset stores UTF-8 text, convert the input first");
  }
  if (!opt.tokenizer) {
    w.add_caption(image, caption, prompt);
    return;
  }
  const std::vector<int32_t> ids = opt.tokenizer->encode(caption, true, true);
  VLM_REQUIRE(int64_t(ids.size()) <= schema::kMaxCaptionTokens, where, ": caption has ", ids.size(),
              " tokens with ", opt.tokenizer_name, " (limit ", schema::kMaxCaptionTokens, ")");
  w.add_caption(image, caption, prompt, &ids);
}

void require_usable_images(const std::string& input, int64_t tried, int64_t bad, const BuildOptions& opt) {
  VLM_REQUIRE(tried > bad, input, ": none of the ", tried, " images could be used",
              tried > 0 ? " (missing or not decodable: see the [build] warnings)" : "", "; nothing written");
  VLM_REQUIRE(double(bad) <= opt.max_bad_images * double(tried), input, ": ", bad, " of the ", tried,
              " images could not be used (see the [build] warnings), more than --data.max_bad_images=",
              opt.max_bad_images, " allows; nothing written");
}

}  // namespace vlm

// Helpers shared by the converters (see converters.h): splits, progress, file reading.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/convert/converters.h"
#include "data/image/image_pipeline.h"
#include "data/load/sampler.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"

namespace vlm {

void write_random_splits(DatasetWriter& w, int64_t n, const BuildOptions& opt) {
  VLM_REQUIRE(opt.val_fraction >= 0 && opt.test_fraction >= 0 && opt.val_fraction + opt.test_fraction < 1,
              "val_fraction + test_fraction must be in [0, 1)");
  std::vector<int64_t> train, val, test;
  if (n > 0) {
    const std::vector<int64_t> p = DistributedSampler::permutation(n, opt.seed, -1);
    const int64_t nv = int64_t(std::floor(double(n) * opt.val_fraction));
    const int64_t nt = int64_t(std::floor(double(n) * opt.test_fraction));
    for (int64_t k = 0; k < n; ++k) (k < nv ? val : k < nv + nt ? test : train).push_back(p[size_t(k)]);
  }
  w.set_split(schema::kSplitTrain, std::move(train));
  w.set_split(schema::kSplitVal, std::move(val));
  w.set_split(schema::kSplitTest, std::move(test));
}

void build_progress(const BuildOptions& opt, const char* what, int64_t i, int64_t n) {
  if (!opt.progress || n <= 0) return;
  const int64_t step = std::max<int64_t>(1, n / 10);
  if (i == n || i % step == 0)
    std::fprintf(stderr, "[build] %s: %lld/%lld (%d%%)\n", what, (long long)i, (long long)n,
                 int(100 * i / n));
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  VLM_REQUIRE(f.good(), path, ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool add_encoded_file(DatasetWriter& w, const std::string& path, int64_t* index) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) {
    std::fprintf(stderr, "[build] warning: %s: cannot open; skipped\n", path.c_str());
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  // Decoding validates the file and gives the size recorded in /images/{height,width}.
  const RgbImage m = decode_rgb(p, bytes.size());
  if (m.empty()) {
    std::fprintf(stderr, "[build] warning: %s: cannot decode as an image; skipped\n", path.c_str());
    return false;
  }
  *index = w.add_encoded(p, bytes.size(), m.height, m.width, 3);
  return true;
}

}  // namespace vlm

// check_dataset (data/storage/dataset_check.h).
#include "data/storage/dataset_check.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "data/image/image_pipeline.h"
#include "data/storage/dataset.h"

namespace vlm {

DatasetCheck check_dataset(const DatasetReader& r, int threads) {
  DatasetCheck c;
  for (int64_t j = 0; j < r.num_captions(); ++j) {
    const int64_t n = int64_t(r.caption(j).size());  // UserError naming file, dataset and caption when not UTF-8
    c.caption_bytes_min = j ? std::min(c.caption_bytes_min, n) : n;
    c.caption_bytes_max = std::max(c.caption_bytes_max, n);
    c.caption_bytes_sum += n;
    ++c.captions;
    if (r.has_prompts()) r.prompt(j), ++c.prompts;
  }
  c.images = r.num_images();
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<int64_t> bad;       // every failing image
  int64_t first = INT64_MAX;      // the smallest of them (c.first_reason is its)
  std::exception_ptr error;       // a read that failed (a corrupt chunk): rethrown
  auto work = [&] {
    std::vector<uint8_t> bytes;
    try {
      for (int64_t i = next++; i < r.num_images(); i = next++) {
        r.image_data(i, bytes);  // raw storage: read (a corrupt chunk fails here), nothing to decode
        if (r.raw()) continue;
        const RgbImage m = decode_rgb(bytes.data(), bytes.size());
        const ImageInfo want = r.image_info(i);
        if (!m.empty() && m.height == want.height && m.width == want.width) continue;
        std::lock_guard lock(mu);
        bad.push_back(i);
        if (i > first) continue;
        first = i;
        c.first_reason = m.empty() ? cat("image ", i, " (", bytes.size(), " bytes) does not decode as a PNG or JPEG image")
                                   : cat("image ", i, " decodes to ", m.height, "x", m.width, ", not its recorded size ",
                                         want.height, "x", want.width, " (/images/height, /images/width)");
      }
    } catch (...) {
      std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
      next = r.num_images();  // the other threads stop too
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  std::sort(bad.begin(), bad.end());
  c.bad_images = int64_t(bad.size());
  bad.resize(std::min(bad.size(), DatasetCheck::kShownBad));
  c.first_bad = std::move(bad);
  return c;
}

}  // namespace vlm

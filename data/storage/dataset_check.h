// check_dataset: what `vlm data inspect` proves about a dataset beyond the reader's
// checks at open (data/storage/dataset.h): every caption and prompt is valid UTF-8 (the
// reader checks each one it reads; here every one is read), and every image decodes
// (encoded storage: PNG or JPEG through the loader's decoder, data/image/image_pipeline.h)
// to the size recorded in /images/{height,width}. Raw storage has nothing to decode, but
// every image is read (a corrupt compressed chunk is a UserError naming the dataset).
// A text that is not UTF-8 is a UserError naming the file, the dataset and the caption
// (as the reader's); images that fail are counted and the first few named, because the
// loader skips them (data/load/loader.h) and the user decides what to do with them
// (docs/errors.md, "Images that do not decode").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vlm {

class DatasetReader;

struct DatasetCheck {
  int64_t captions = 0, prompts = 0;  // texts read (all valid: else UserError)
  int64_t caption_bytes_min = 0, caption_bytes_max = 0, caption_bytes_sum = 0;
  int64_t images = 0;                 // images read (and, encoded, decoded)
  int64_t bad_images = 0;             // undecodable, or not of their recorded size
  std::vector<int64_t> first_bad;     // their indices, ascending, at most kShownBad
  std::string first_reason;           // why the first of them failed
  static constexpr size_t kShownBad = 8;
};

// Reads every caption and prompt, then decodes every image on `threads` threads (at
// least 1). OpenCV's own messages go to stderr; the caller may silence them.
DatasetCheck check_dataset(const DatasetReader& r, int threads);

}  // namespace vlm

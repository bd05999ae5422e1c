// Fuzz target: image bytes decoded as the converters and the loader do
// (data/image/image_pipeline.h), and when they decode, letterboxed to 32 x 32.
#include <vector>

#include "data/image/image_pipeline.h"
#include "fuzz_util.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const RgbImage m = decode_rgb(data, size, 7);
  if (!m.empty()) {
    std::vector<uint8_t> canvas(32 * 32 * 3);
    letterbox_into(m.view(), 32, 7, canvas.data());
  }
  return 0;
}

// Fuzz target: a safetensors file (io/safetensors.h) opened and every tensor of at
// most 2^20 elements read whole and, when 2-D, as a column slice.
#include "fuzz_util.h"
#include "io/safetensors.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch("model.safetensors");
  fuzz::write_bytes(path, data, size);
  fuzz::refusal_allowed([&] {
    SafetensorsFile f(path);
    for (const StTensorInfo& t : f.tensors()) {
      if (t.numel() > (int64_t(1) << 20)) continue;
      fuzz::refusal_allowed([&] { f.read_f32(t.name); });
      if (t.shape.size() == 2 && t.shape[1] >= 2)
        fuzz::refusal_allowed([&] { f.read_slice_f32(t.name, 1, 1, t.shape[1]); });
    }
  });
  return 0;
}

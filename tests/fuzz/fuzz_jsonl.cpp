// Fuzz target: the JSONL and LLaVA converters (data/convert/converters.h) end to end:
// the first byte picks the format and the options (bad-image fraction, outside paths,
// limit); the rest is the caption file, in a folder holding a real image (the SigLIP
// fixture's), a truncated one and a text file. Output goes to a scratch .h5.
#include <filesystem>

#include "data/convert/converters.h"
#include "fuzz_util.h"

using namespace vlm;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_stdout();
  const std::string png = fuzz::read_bytes(std::string(VLM_SOURCE_DIR) + "/tests/data/hf_tiny/siglip/image.png");
  std::filesystem::create_directories(fuzz::scratch("img/sub"));
  fuzz::write_bytes(fuzz::scratch("img/a.png"), png.data(), png.size());
  fuzz::write_bytes(fuzz::scratch("img/sub/b.png"), png.data(), png.size());
  fuzz::write_bytes(fuzz::scratch("img/bad.png"), png.data(), png.size() / 3);
  fuzz::write_bytes(fuzz::scratch("img/c.txt"), "text", 4);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool llava = data[0] & 1;
  const std::string input = fuzz::scratch(llava ? "img/caps.json" : "img/caps.jsonl");
  fuzz::write_bytes(input, data + 1, size - 1);
  BuildOptions o;
  o.out = fuzz::scratch("out.h5");
  o.progress = false;
  o.max_bad_images = (data[0] & 2) ? 1.0 : 0.1;
  o.allow_outside_images = data[0] & 4;
  o.limit = (data[0] >> 3) & 3;
  fuzz::refusal_allowed([&] {
    if (llava) build_from_llava(input, fuzz::scratch("img"), o);
    else build_from_jsonl(input, fuzz::scratch("img"), o);
  });
  return 0;
}

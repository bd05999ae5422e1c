// Fuzz target: a Hugging Face config.json read as a Llama/Qwen2 backbone config
// (llm/hf_config.h) and as a SigLIP/LLaVA vision config (vision/siglip_config.h).
#include "fuzz_util.h"
#include "llm/hf_config.h"
#include "vision/siglip_config.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch("config.json");
  fuzz::write_bytes(path, data, size);
  fuzz::refusal_allowed([&] { (void)read_hf_config(path); });
  fuzz::refusal_allowed([&] { (void)read_siglip_config(path); });
  return 0;
}

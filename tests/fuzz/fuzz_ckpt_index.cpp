// Fuzz target: a sharded checkpoint's index.json (checkpoint/shard_format.h parse_index)
// parsed from the bytes; what parses is written back and must parse to the same text.
#include "checkpoint/shard_format.h"
#include "fuzz_util.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::refusal_allowed([&] {
    const CheckpointIndex idx = parse_index(bytes, "index.json");
    const std::string text = index_json(idx);
    if (index_json(parse_index(text, "index.json")) != text) __builtin_trap();  // not a fixed point
  });
  return 0;
}

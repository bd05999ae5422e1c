// Fuzz target: a sharded checkpoint's shard file (checkpoint/shard_format.h parse_shard:
// the trailer, the header's length and the JSON header against the data area) parsed
// from the bytes; a header that parses is written back and must parse to the same text.
#include "checkpoint/shard_format.h"
#include "fuzz_util.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::refusal_allowed([&] {
    const ShardHeader h = parse_shard(bytes, "rank_0.5eed01.shard");
    const std::string json = shard_header_json(h);
    const ShardHeader again = parse_shard_header(json, "rank_0.5eed01.shard", h.data_bytes());
    if (shard_header_json(again) != json) __builtin_trap();  // not a fixed point
  });
  return 0;
}

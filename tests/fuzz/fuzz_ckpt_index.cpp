// Fuzz target: a sharded checkpoint's index.json (checkpoint/shard_format.h parse_index)
// parsed from the bytes; what parses is written back and must parse to the same text.
// The bytes are parsed as given and, when they begin with a checksum, re-signed (the
// checksum recomputed over the bytes after it), so that mutations reach the checks
// behind the checksum as well.
#include <string>

#include "checkpoint/shard_format.h"
#include "fuzz_util.h"
#include "io/crc32c.h"

using namespace vlm;

namespace {

void parse(std::string_view bytes) {
  fuzz::refusal_allowed([&] {
    const CheckpointIndex idx = parse_index(bytes, "index.json");
    const std::string text = index_json(idx);
    if (index_json(parse_index(text, "index.json")) != text) __builtin_trap();  // not a fixed point
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  parse(bytes);
  constexpr std::string_view head = "{\"crc32c\":";
  const size_t comma = bytes.find(',');
  if (bytes.substr(0, head.size()) == head && comma != std::string_view::npos) {
    const std::string_view rest = bytes.substr(comma + 1);
    parse(std::string(head) + std::to_string(crc32c(rest.data(), rest.size())) + "," + std::string(rest));
  }
  return 0;
}

// Editing a sharded checkpoint's index in the tests: an edit the index's structure
// allows is refused by its checksum before the check a test aims at, unless the text is
// re-signed. Written from the format's description (checkpoint/shard_format.h: the text
// begins {"crc32c":<C>, with C the CRC-32C of every byte after that comma), not from its
// code, so the tests check the writer's checksum too.
#pragma once
#include <string>

#include "io/crc32c.h"

namespace vlm::test {

inline std::string resigned_index(const std::string& text) {
  const std::string rest = text.substr(text.find(',') + 1);
  return "{\"crc32c\":" + std::to_string(crc32c(rest.data(), rest.size())) + "," + rest;
}

}  // namespace vlm::test

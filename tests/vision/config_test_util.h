// Helpers of the vision config tests: the support helpers they use (tests/support) and a
// safetensors header reader (the tests link vlm_vision and vlm_core only, so the header
// is parsed here with base/json).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/json.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm::test {

// The JSON header of a safetensors file: {name: {dtype, shape, data_offsets}, "__metadata__": {...}}.
inline json::Value safetensors_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot open");
  unsigned char n8[8];
  f.read(reinterpret_cast<char*>(n8), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | n8[i];
  if (!f || n > (1u << 20)) throw UserError(path + ": bad safetensors header length");
  std::string text(n, '\0');
  f.read(text.data(), std::streamsize(n));
  return json::parse(text, path);
}

}  // namespace vlm::test

// Reader of IDX files (MNIST / Fashion-MNIST), plain or gzip-compressed.
// Invariants: magic checked (0x0000 08 <ndim>: unsigned bytes only); dims bounded
// (at most 4 dims, each <= 2^24, total <= 2^32 bytes) before any allocation; a short
// file is a UserError naming it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vlm {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major
};

// Reads at most `max_items` entries of the first dimension (0 = all).
IdxArray read_idx(const std::string& path, int64_t max_items = 0);

}  // namespace vlm

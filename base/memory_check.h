// Memory checks made before allocating from a size that came from a file or the
// command line, so a huge declared count gives one line naming the field (not
// std::bad_alloc, not the OOM killer).
// Invariant: every reader that allocates from a size it read calls require_allocatable
// (or a tighter bound of its format) first; docs/errors.md states the rule.
#pragma once
#include <cstdint>
#include <string_view>

namespace vlm {

// Bytes this process may still allocate: MemAvailable of /proc/meminfo (physical
// memory when that is unreadable), capped by the address-space limit (ulimit -v).
uint64_t allocatable_bytes();

// Throws UserError "<what>: needs X GiB, more than the Y GiB of memory available"
// when `bytes` exceed allocatable_bytes().
void require_allocatable(uint64_t bytes, std::string_view what);

// a * b, or UINT64_MAX when the product overflows (for sizes about to be checked).
inline uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace vlm

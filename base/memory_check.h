// Memory checks made before allocating from a size that came from a file or the
// command line, so a huge declared count gives one line naming the field (not
// std::bad_alloc, not the OOM killer).
// Invariant: every reader that allocates from a size it read calls require_allocatable
// (or a tighter bound of its format) first; docs/errors.md states the rule.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace vlm {

// Bytes this process may still allocate: MemAvailable of /proc/meminfo (physical
// memory when that is unreadable), capped by the address-space limit (ulimit -v).
uint64_t allocatable_bytes();

// Throws UserError "<what>: needs X GiB, more than the Y GiB of memory available"
// when `bytes` exceed allocatable_bytes().
void require_allocatable(uint64_t bytes, std::string_view what);

// "1.23 GiB" / "456.7 MiB" / "12.0 KiB" / "17 B" (binary units), for messages and plans.
std::string format_bytes(double bytes);
// The same followed by the exact count when it is rounded: "16.1 KiB (16448 B)", "17 B".
std::string format_bytes_exact(uint64_t bytes);

// a * b, or UINT64_MAX when the product overflows (for sizes about to be checked).
inline uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace vlm

// CPU copy, copy_from_host and copy_to_host (core/ops/elementwise.inc): dst = src as
// bytes, any dtype (host and device are the same memory here). Large tensors are copied
// in fixed 1 MiB chunks spread over the thread pool (core/cpu/thread_pool.h); the result
// does not depend on the thread count (every byte is written once, from the same source
// byte).
#include <algorithm>
#include <cstring>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void copy(Stream& s, const Tensor& dst, const Tensor& src) {
  if (dst.data() == src.data()) return;
  const size_t n = src.nbytes();
  char* d = static_cast<char*>(dst.data());
  const char* p = static_cast<const char*>(src.data());
  constexpr size_t kChunk = size_t(1) << 20;
  const int64_t chunks = int64_t((n + kChunk - 1) / kChunk);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t at = size_t(c) * kChunk;
      std::memcpy(d + at, p + at, std::min(kChunk, n - at));
    }
  });
}

void copy_from_host(Stream& s, const Tensor& dst, const Tensor& src) { cpu::copy(s, dst, src); }
void copy_to_host(Stream& s, const Tensor& dst, const Tensor& src) { cpu::copy(s, dst, src); }

}  // namespace vlm::cpu

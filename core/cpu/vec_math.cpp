// The GELU loops of vec_math.h, 16 lanes at a time, one body per x86-64 level
// (VLM_CPU_CLONES): lane-wise code, so every level gives the same bits.
// The 64-byte vectors pass between inlined helpers only: no call crosses an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "core/cpu/vec_math.h"

namespace vlm::cpu {
namespace {

// The first w <= 16 lanes from / to p (the others load as 0).
inline v16f load16(const float* p, int64_t w) {
  v16f v{};
  std::memcpy(&v, p, size_t(w) * sizeof(float));
  return v;
}
inline void store16(float* p, v16f v, int64_t w) { std::memcpy(p, &v, size_t(w) * sizeof(float)); }

}  // namespace

VLM_CPU_CLONES void gelu_f32(float* y, const float* x, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) store16(y + j, gelu_v<v16f, v16i>(load16(x + j, 16)), 16);
  if (j < n) store16(y + j, gelu_v<v16f, v16i>(load16(x + j, n - j)), n - j);
}

VLM_CPU_CLONES void gelu_grad_f32(float* d, const float* x, const float* g, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) store16(d + j, load16(g + j, 16) * gelu_grad_v<v16f, v16i>(load16(x + j, 16)), 16);
  if (j < n) store16(d + j, load16(g + j, n - j) * gelu_grad_v<v16f, v16i>(load16(x + j, n - j)), n - j);
}

}  // namespace vlm::cpu

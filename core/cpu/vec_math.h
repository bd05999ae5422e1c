// Branch-free f32 math on GCC/Clang vectors for the CPU ops' hot loops (attention
// softmax, tanh-GELU in matmul epilogues and gelu_forward/backward); not a public
// header. The f64 paths keep std:: functions (gradient checks need them exact).
//  - exp_v / tanh_v / gelu_v / gelu_grad_v: lane-wise, on any vector width (v4f, v16f):
//    every lane runs the same IEEE operations in the same order (no contraction:
//    core/CMakeLists.txt), so a value does not depend on the width nor on the
//    instruction set a clone was compiled for.
//  - exp_v4: Cephes expf, relative error < 2e-7; x clamped to [-87.3, 88.3] (so exp of
//    a very negative x is FLT_MIN, not 0).
//  - tanh_v4: sign(u) (1 - 2 / (exp(2|u|) + 1)), absolute error < 3e-7.
//  - gelu_f32 / gelu_grad_f32: the GPT-2 tanh GELU (cpu_util.h) over n floats, 16 lanes
//    at a time in VLM_CPU_CLONES bodies (vec_math.cpp: one zmm on AVX-512, two ymm on
//    AVX2, four xmm at baseline). Every element goes through the same vector code (a
//    short tail is padded), so a value never depends on its position or on how a loop
//    was split between threads.
//  - exp_shifted: the exponentials of a softmax row (attention.cpp, decode.cpp share it,
//    so cached decoding and full attention round alike).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/cpu/cpu_util.h"

namespace vlm::cpu {

using v4f = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));
using v16f = float __attribute__((vector_size(64)));
using v16i = int32_t __attribute__((vector_size(64)));

// VI: the int32 vector of V's lane count.
template <typename V, typename VI>
inline V exp_v(V x) {
  x = x < -87.33654f ? V{} - 87.33654f : x;
  x = x > 88.3762626647949f ? V{} + 88.3762626647949f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to nearest
  const V n = (x * 1.44269504088896341f + magic) - magic;
  x = x - n * 0.693359375f + n * 2.12194440e-4f;  // x - n ln2 in two parts
  V y = x * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * x * x + x + 1.0f;
  const VI e = (__builtin_convertvector(n, VI) + 127) << 23;  // bits of 2^n
  V p2;
  std::memcpy(&p2, &e, sizeof p2);
  return y * p2;
}

template <typename V, typename VI>
inline V tanh_v(V u) {
  const V a = u < 0.0f ? -u : u;
  const V t = 1.0f - 2.0f / (exp_v<V, VI>(a + a) + 1.0f);
  return u < 0.0f ? -t : t;
}

template <typename V, typename VI>
inline V gelu_v(V x) {
  const float k = float(kGeluK), c = float(kGeluC);
  return 0.5f * x * (1.0f + tanh_v<V, VI>(k * (x + c * x * x * x)));
}

template <typename V, typename VI>
inline V gelu_grad_v(V x) {
  const float k = float(kGeluK), c = float(kGeluC);
  const V t = tanh_v<V, VI>(k * (x + c * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
}

inline v4f exp_v4(v4f x) { return exp_v<v4f, v4i>(x); }
inline v4f tanh_v4(v4f u) { return tanh_v<v4f, v4i>(u); }

// Calls f(j, w) for chunks [j, j+w) of [0, n), w = 4 but for a last shorter chunk.
template <typename F>
inline void for_chunks4(int64_t n, F&& f) {
  for (int64_t j = 0; j < n; j += 4) f(j, n - j < 4 ? n - j : 4);
}

// The first w <= 4 lanes from / to p (the others load as 0). Full chunks are one
// unaligned vector move; only the tail takes the variable-size copy.
inline v4f load4(const float* p, int64_t w) {
  v4f v{};
  if (w == 4)
    std::memcpy(&v, p, sizeof v);
  else
    std::memcpy(&v, p, size_t(w) * sizeof(float));
  return v;
}
inline void store4(float* p, v4f v, int64_t w) {
  if (w == 4)
    std::memcpy(p, &v, sizeof v);
  else
    std::memcpy(p, &v, size_t(w) * sizeof(float));
}

// y[i] = gelu(x[i]); y may alias x (vec_math.cpp).
void gelu_f32(float* y, const float* x, int64_t n);

// d[i] = g[i] * gelu'(x[i]); d may alias g or x (vec_math.cpp).
void gelu_grad_f32(float* d, const float* x, const float* g, int64_t n);

// x[j] = exp(x[j] - m), j < n; returns sum_j x[j] in double (f32: exp_v4, four lane
// sums added in a fixed order at the end; f64: std::exp).
inline double exp_shifted(double* x, int64_t n, double m) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(x[j] - m));
  return sum;
}
inline double exp_shifted(float* x, int64_t n, float m) {
  double lane[4] = {0, 0, 0, 0};
  for_chunks4(n, [&](int64_t j, int64_t w) {
    const v4f v = exp_v4(load4(x + j, w) - m);
    store4(x + j, v, w);
    for (int64_t i = 0; i < w; ++i) lane[i] += double(v[i]);
  });
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

}  // namespace vlm::cpu

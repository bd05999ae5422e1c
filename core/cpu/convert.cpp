// CPU dtype conversion (core/ops/elementwise.inc `convert`, `round_bf16`): dst = src
// between f32, bf16 and f64 (any pair, including a plain copy for equal dtypes); same
// numel. round_bf16 is f32 -> bf16 -> f32 in place (dtype.h's f32_to_bf16).
// Every conversion rounds to nearest even exactly once: f64 -> bf16 goes through f32
// with round-to-odd (f32 keeps 16 more bits than bf16, so the final RNE step is exact),
// avoiding the double-rounding error of a plain f64 -> f32 -> bf16 chain.
// NaN stays NaN, infinities stay infinite, values beyond the bf16 range become inf.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

// f64 -> f32 rounded to odd: truncate toward zero, then set the last bit if inexact.
float f64_to_f32_round_odd(double d) {
  float f = float(d);
  if (std::isnan(d) || double(f) == d) return f;
  if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= 1u;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename D, typename S>
D convert_one(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<D, bf16>) {
    if constexpr (std::is_same_v<S, double>)
      return f32_to_bf16(f64_to_f32_round_odd(x));
    else
      return f32_to_bf16(x);
  } else if constexpr (std::is_same_v<S, bf16>) {
    return D(bf16_to_f32(x));
  } else {
    return D(x);
  }
}

template <typename F>
void dispatch_convert(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F64: f(double{}); return;
    case DType::BF16: f(bf16{}); return;
    default: VLM_ASSERT(false, "convert: unsupported dtype ", dtype_name(t), " (f32, bf16, f64)");
  }
}

}  // namespace

void convert(Stream& s, const Tensor& dst, const Tensor& src) {
  dispatch_convert(dst.dtype(), [&](auto dtag) {
    dispatch_convert(src.dtype(), [&](auto stag) {
      using D = decltype(dtag);
      using S = decltype(stag);
      D* d = dst.ptr<D>();
      const S* p = src.ptr<S>();
      const int64_t n = src.numel();
      parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = convert_one<D>(p[i]);
      });
    });
  });
}

void round_bf16(Stream& s, const Tensor& x) {
  float* p = x.ptr<float>();
  parallel_for(x.numel(), kGrainStream, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
  });
}

}  // namespace vlm::cpu

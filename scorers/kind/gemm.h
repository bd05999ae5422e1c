// The matmul options the scorer kinds write their products with (core/ops.h GemmOpts).
#pragma once
#include "core/ops.h"

namespace vlm {

inline GemmOpts scorer_gemm(bool trans_a, bool trans_b, float beta = 0.f, float alpha = 1.f) {
  GemmOpts o;
  o.trans_a = trans_a, o.trans_b = trans_b, o.beta = beta, o.alpha = alpha;
  return o;
}

}  // namespace vlm

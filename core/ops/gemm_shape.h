// The shape contract of matmul (core/ops/gemm.inc), resolved once for both backends:
// M, N, K from the 2-D or 3-D operands and the transposes, the batch count, and the
// element stride between batch entries of each operand (0 = a 2-D operand broadcast
// over the batch). Mismatched shapes are internal errors (VLM_ASSERT) naming both:
// matmul's contract (core/ops/contract_gemm.cpp) calls it first, so the backends' own
// calls (for the sizes) never fail.
#pragma once
#include <cstdint>

#include "core/ops.h"

namespace vlm {

struct GemmShape {
  int64_t M, N, K;
  int64_t batch;                  // 1 when no operand is 3-D
  int64_t stride_a, stride_b, stride_c;  // elements between batch entries (0 = broadcast)
};

GemmShape gemm_shape(const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o);

}  // namespace vlm

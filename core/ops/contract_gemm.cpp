// Contracts of core/ops/gemm.inc (see contract.h).
#include "core/ops/contract.h"
#include "core/ops/gemm_shape.h"

namespace vlm::contract {

void matmul(const Op& op, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  // A and B: one float dtype, or a bf16 GEMM (A or B bf16, the other f32 or bf16).
  constexpr Kernels kOperand{{DType::F32, DType::F64, DType::BF16}, {DType::F32, DType::BF16}};
  op.dtype(A, "A", kOperand);
  op.dtype(B, "B", kOperand);
  op.on_device(C, "C");
  const bool a_bf16 = A.dtype() == DType::BF16, b_bf16 = B.dtype() == DType::BF16;
  if (a_bf16 || b_bf16) {
    VLM_ASSERT((a_bf16 || A.dtype() == DType::F32) && (b_bf16 || B.dtype() == DType::F32),
               "matmul: mixed-precision operands ", A.str(), " and ", B.str(), " (f32 and/or bf16)");
    // C f32; bf16 only on CUDA (cuBLASLt writes it), when A and B both are bf16.
    constexpr Kernels kOut{{DType::F32}, {DType::F32, DType::BF16}};
    op.dtype(C, "C", a_bf16 && b_bf16 ? kOut : kF32);
  } else {
    VLM_ASSERT(A.dtype() == C.dtype() && B.dtype() == C.dtype(), "matmul: dtypes differ: A ", A.str(), " B ",
               B.str(), " C ", C.str());
  }
  const GemmShape g = gemm_shape(C, A, B, o);
  op.disjoint(C, "C", A, "A");
  op.disjoint(C, "C", B, "B");
  if (o.bias) {
    op.on_device(*o.bias, "bias");
    const bool dtype_ok = o.bias->dtype() == C.dtype() || (C.dtype() == DType::BF16 && o.bias->dtype() == DType::F32);
    VLM_ASSERT(o.bias->numel() == g.N && dtype_ok, "matmul: bias is ", o.bias->str(), ", expected [", g.N,
               "] of C's dtype (or f32 for a bf16 C), C is ", C.str());
  }
  if (o.gelu && o.pre_gelu) op.same(*o.pre_gelu, C, "pre_gelu");
}

void bias_backward(const Op& op, const Tensor& dbias, const Tensor& dout) {
  op.dtype(dout, "dout");
  op.elems(dbias, dout.dtype(), dout.cols(), "dbias");
}

}  // namespace vlm::contract

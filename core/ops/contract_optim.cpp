// Contracts of core/ops/optim.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {

void adamw_step(const Op& op, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const Tensor& param_copy, const AdamWOpts& o) {
  op.dtype(param, "param");
  op.same(grad, param, "grad");
  op.same(m, param, "m");
  op.same(v, param, "v");
  VLM_ASSERT(o.step >= 1, op.name, ": step ", o.step, " must be >= 1 (1-based)");
  if (!param_copy.defined()) return;
  constexpr Kernels kCopy{{DType::F32, DType::F64, DType::BF16}, {DType::F32, DType::BF16}};
  op.dtype(param_copy, "param_copy", kCopy);
  VLM_ASSERT(param_copy.numel() == param.numel(), op.name, ": param_copy ", param_copy.str(), " vs ", param.str());
}

}  // namespace vlm::contract

// Contracts of core/ops/softmax.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {

void softmax_forward(const Op& op, const Tensor& out, const Tensor& in) {
  op.dtype(in, "in");
  op.same(out, in, "out");
}

void softmax_backward(const Op& op, const Tensor& din, const Tensor& dout, const Tensor& out) {
  op.dtype(out, "out");
  op.same(dout, out, "dout");
  op.same(din, out, "din");
}

}  // namespace vlm::contract

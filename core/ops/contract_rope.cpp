// Contracts of core/ops/rope.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// x[T,NH,HS] with HS even, y like x, pos[T] i32, theta > 0 (forward: x = in, y = out;
// backward: x = dout, y = din).
void rope_rules(const Op& op, const Tensor& y, const char* y_what, const Tensor& x, const char* x_what,
                const Tensor& pos, float theta) {
  op.dtype(x, x_what);
  VLM_ASSERT(x.ndim() == 3 && x.size(2) % 2 == 0, op.name, ": expected ", x_what, "[T,NH,HS] with even HS, got ",
             x.str());
  op.same(y, x, y_what);
  op.elems(pos, DType::I32, x.size(0), "pos");
  VLM_ASSERT(theta > 0.f, op.name, ": theta must be > 0, got ", theta);
}

}  // namespace

void rope_forward(const Op& op, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) {
  rope_rules(op, out, "out", in, "in", pos, theta);
}

void rope_backward(const Op& op, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) {
  rope_rules(op, din, "din", dout, "dout", pos, theta);
}

}  // namespace vlm::contract

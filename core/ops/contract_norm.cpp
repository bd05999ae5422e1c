// Contracts of core/ops/norm.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// in[N,C] in a dtype the kernels take, w[C] of in's dtype; returns N.
int64_t rows_and_weight(const Op& op, const Tensor& in, const Tensor& w) {
  op.dtype(in, "in");
  op.elems(w, in.dtype(), in.cols(), "w");
  return in.rows();
}

// A [C] vector of in's dtype (bias b, gradients dw, db), or undefined (no bias, a frozen norm).
void optional_row(const Op& op, const Tensor& g, const Tensor& in, const char* what) {
  if (g.defined()) op.elems(g, in.dtype(), in.cols(), what);
}

}  // namespace

void layernorm_forward(const Op& op, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& w, const Tensor& b, float) {
  const int64_t N = rows_and_weight(op, in, w);
  op.same(out, in, "out");
  optional_row(op, b, in, "b");
  op.stat(mean, N, "mean");
  op.stat(rstd, N, "rstd");
}

void layernorm_backward(const Op& op, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                        const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = rows_and_weight(op, in, w);
  op.same(dout, in, "dout");
  op.same(din, in, "din");
  optional_row(op, dw, in, "dw");
  optional_row(op, db, in, "db");
  op.stat(mean, N, "mean");
  op.stat(rstd, N, "rstd");
}

void rmsnorm_forward(const Op& op, const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w, float) {
  const int64_t N = rows_and_weight(op, in, w);
  op.same(out, in, "out");
  op.stat(rstd, N, "rstd");
}

void rmsnorm_backward(const Op& op, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in,
                      const Tensor& w, const Tensor& rstd) {
  const int64_t N = rows_and_weight(op, in, w);
  op.same(dout, in, "dout");
  op.same(din, in, "din");
  optional_row(op, dw, in, "dw");
  op.stat(rstd, N, "rstd");
}

}  // namespace vlm::contract

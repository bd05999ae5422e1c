// Contracts of core/ops/norm.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// in[N,C] in an activation dtype the kernels take, w[C] of its compute dtype; returns N.
int64_t rows_and_weight(const Op& op, const Tensor& in, const Tensor& w) {
  op.dtype(in, "in", kAct);
  op.elems(w, compute_dtype(in.dtype()), in.cols(), "w");
  return in.rows();
}

// A [C] vector of w's dtype (bias b, gradients dw, db), or undefined (no bias, a frozen norm).
void optional_row(const Op& op, const Tensor& g, const Tensor& in, const char* what) {
  if (g.defined()) op.elems(g, compute_dtype(in.dtype()), in.cols(), what);
}

// The fused residual add: a, b and sum of in's dtype and shape; sum is a, b or disjoint
// from both; out disjoint from sum, a and b.
void residual_add(const Op& op, const Tensor& sum, const Tensor& out, const Tensor& a, const Tensor& b) {
  op.dtype(a, "a", kAct);
  op.same(b, a, "b");
  op.same(sum, a, "sum");
  for (const Tensor* t : {&a, &b})
    if (t->data() != sum.data()) op.disjoint(sum, "sum", *t, t == &a ? "a" : "b");
  op.disjoint(out, "out", sum, "sum");
  op.disjoint(out, "out", a, "a");
  op.disjoint(out, "out", b, "b");
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

void add_layernorm_forward(const Op& op, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                           const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias, float eps) {
  residual_add(op, sum, out, a, b);
  layernorm_forward(op, out, mean, rstd, sum, w, bias, eps);
}

void add_rmsnorm_forward(const Op& op, const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a,
                         const Tensor& b, const Tensor& w, float eps) {
  residual_add(op, sum, out, a, b);
  rmsnorm_forward(op, out, rstd, sum, w, eps);
}

void add_layernorm_backward(const Op& op, const Tensor& dsum, const Tensor& dw, const Tensor& db, const Tensor& dout,
                            const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  layernorm_backward(op, dsum, dw, db, dout, in, w, mean, rstd);
  op.disjoint(dsum, "dsum", dout, "dout");
  op.disjoint(dsum, "dsum", in, "in");
}

void add_rmsnorm_backward(const Op& op, const Tensor& dsum, const Tensor& dw, const Tensor& dout, const Tensor& in,
                          const Tensor& w, const Tensor& rstd) {
  rmsnorm_backward(op, dsum, dw, dout, in, w, rstd);
  op.disjoint(dsum, "dsum", dout, "dout");
  op.disjoint(dsum, "dsum", in, "in");
}

}  // namespace vlm::contract

// Contracts of core/ops/relevance.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// t is [N,3] (any shape of 3N elements) of ref's dtype.
void stats3(const Op& op, const Tensor& t, const Tensor& ref, const char* what) {
  op.elems(t, ref.dtype(), ref.rows() * 3, what);
}

}  // namespace

void sigmoid_forward(const Op& op, const Tensor& out, const Tensor& in) {
  op.dtype(in, "in");
  op.same(out, in, "out");
}

void sigmoid_backward(const Op& op, const Tensor& din, const Tensor& dout, const Tensor& out) {
  op.dtype(out, "out");
  op.same(dout, out, "dout");
  op.same(din, out, "din");
}

void row_stats_forward(const Op& op, const Tensor& out, const Tensor& in, float) {
  op.dtype(in, "in");
  VLM_ASSERT(in.cols() > 0, op.name, ": empty rows in ", in.str());
  stats3(op, out, in, "out");
}

void row_stats_backward(const Op& op, const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& out) {
  op.dtype(in, "in");
  op.same(din, in, "din");
  stats3(op, out, in, "out");
  stats3(op, dout, in, "dout");
}

}  // namespace vlm::contract

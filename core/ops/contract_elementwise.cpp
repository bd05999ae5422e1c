// Contracts of core/ops/elementwise.inc (see contract.h).
#include <utility>

#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

using Named = std::pair<const Tensor*, const char*>;

// An elementwise op: every operand has the first input's dtype (one the kernels take) and
// shape; an output is one of the inputs (in place) or shares no byte with it, and the
// outputs share none with each other.
void elementwise(const Op& op, std::initializer_list<Named> outputs, std::initializer_list<Named> inputs) {
  const Tensor& ref = *inputs.begin()->first;
  op.dtype(ref, inputs.begin()->second);
  for (const auto& [t, what] : inputs) op.same(*t, ref, what);
  for (const auto* o = outputs.begin(); o != outputs.end(); ++o) {
    op.same(*o->first, ref, o->second);
    for (const auto& [t, what] : inputs)
      if (t->data() != o->first->data()) op.disjoint(*o->first, o->second, *t, what);
    for (const auto* p = outputs.begin(); p != o; ++p) op.disjoint(*o->first, o->second, *p->first, p->second);
  }
}

// copy's rules (any dtype): same dtype and element count; within one memory, dst == src
// (a no-op) or no overlap.
void copy_rules(const Op& op, const Tensor& dst, const Tensor& src) {
  VLM_ASSERT(dst.dtype() == src.dtype() && dst.numel() == src.numel(), op.name, ": dst ", dst.str(), " src ",
             src.str(), ": dtype and element count must agree");
  if (dst.device() == src.device() && dst.data() != src.data()) op.disjoint(dst, "dst", src, "src");
}

// slice_cols / unslice_cols: the narrow tensor [N,w] is columns [offset, offset+w) of
// the wide one [N,W], of the same dtype.
void cols_rules(const Op& op, const Tensor& wide, const char* wide_what, const Tensor& narrow,
                const char* narrow_what, int64_t offset) {
  op.dtype(wide, wide_what);
  op.on_device(narrow, narrow_what);
  VLM_ASSERT(narrow.dtype() == wide.dtype() && narrow.rows() == wide.rows() && offset >= 0 &&
                 offset + narrow.cols() <= wide.cols(),
             op.name, ": columns [", offset, ", +", narrow.cols(), ") of ", wide.str(), " as ", narrow.str());
}

}  // namespace

void fill(const Op& op, const Tensor& x, float) { op.dtype(x, "x"); }

void scale(const Op& op, const Tensor& x, float) { op.dtype(x, "x"); }

void add(const Op& op, const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise(op, {{&out, "out"}}, {{&a, "a"}, {&b, "b"}});
}

void accumulate(const Op& op, const Tensor& y, const Tensor& x, float) { elementwise(op, {{&y, "y"}}, {{&x, "x"}}); }

void mul(const Op& op, const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise(op, {{&out, "out"}}, {{&a, "a"}, {&b, "b"}});
}

void copy(const Op& op, const Tensor& dst, const Tensor& src) {
  op.on_device(dst, "dst");
  op.on_device(src, "src");
  copy_rules(op, dst, src);
}

void copy_from_host(const Op& op, const Tensor& dst, const Tensor& src) {
  op.on_device(dst, "dst");
  op.on_host(src, "src");
  copy_rules(op, dst, src);
}

void copy_to_host(const Op& op, const Tensor& dst, const Tensor& src) {
  op.on_host(dst, "dst");
  op.on_device(src, "src");
  copy_rules(op, dst, src);
}

void convert(const Op& op, const Tensor& dst, const Tensor& src) {
  constexpr Kernels kConvert{{DType::F32, DType::BF16, DType::F64}, {DType::F32, DType::BF16, DType::F64}};
  op.dtype(dst, "dst", kConvert);
  op.dtype(src, "src", kConvert);
  VLM_ASSERT(dst.numel() == src.numel(), "convert: numel differs: ", src.str(), " -> ", dst.str());
}

void round_bf16(const Op& op, const Tensor& x) { op.dtype(x, "x", kF32); }

void bias_add(const Op& op, const Tensor& out, const Tensor& in, const Tensor& bias) {
  elementwise(op, {{&out, "out"}}, {{&in, "in"}});
  op.elems(bias, in.dtype(), in.cols(), "bias");
}

void slice_cols(const Op& op, const Tensor& dst, const Tensor& src, int64_t offset) {
  cols_rules(op, src, "src", dst, "dst", offset);
}

void unslice_cols(const Op& op, const Tensor& dst, const Tensor& src, int64_t offset) {
  cols_rules(op, dst, "dst", src, "src", offset);
}

void gelu_forward(const Op& op, const Tensor& out, const Tensor& in) {
  elementwise(op, {{&out, "out"}}, {{&in, "in"}});
}

void gelu_backward(const Op& op, const Tensor& din, const Tensor& in, const Tensor& dout) {
  elementwise(op, {{&din, "din"}}, {{&in, "in"}, {&dout, "dout"}});
}

void swiglu_forward(const Op& op, const Tensor& out, const Tensor& gate, const Tensor& up) {
  elementwise(op, {{&out, "out"}}, {{&gate, "gate"}, {&up, "up"}});
}

void swiglu_backward(const Op& op, const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  elementwise(op, {{&dgate, "dgate"}, {&dup, "dup"}}, {{&gate, "gate"}, {&up, "up"}, {&dout, "dout"}});
}

void sum_squares(const Op& op, const Tensor& out, const Tensor& x) {
  op.dtype(x, "x");
  op.elems(out, x.dtype(), 1, "out");
}

}  // namespace vlm::contract

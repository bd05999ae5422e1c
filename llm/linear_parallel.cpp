// Column- and row-parallel linear layers; math in linear_parallel.h.
#include "llm/linear_parallel.h"

#include "core/ops.h"
#include "parallel/regions.h"

namespace vlm {

namespace {

// [T, ...] viewed as [T, features] (q/k/v are [T, heads, HS]).
Tensor as2d(const Tensor& t) { return t.view(Shape{t.size(0), t.numel() / t.size(0)}); }

// dW += dy^T x ; db += sum_rows dy
void weight_grads(Stream& s, const Linear& l, const Tensor& dy, const Tensor& x) {
  GemmOpts o;
  o.trans_a = true;
  o.beta = 1.f;
  matmul(s, l.dw, as2d(dy), as2d(x), o);
  if (l.b.defined()) bias_backward(s, l.db, as2d(dy));
}

}  // namespace

void column_parallel_forward(LlmContext& ctx, const Tensor& x_full, const Tensor& x,
                             std::initializer_list<ColumnOut> outs) {
  Stream& s = ctx.stream;
  if (ctx.seq_parallel())
    gather_from_sequence_region_forward(s, ctx.tp, x_full, x);
  else
    copy_to_region_forward(s, ctx.tp, x_full, x);
  for (const ColumnOut& o : outs) {
    GemmOpts g;
    g.trans_b = true;
    if (o.lin->b.defined()) g.bias = &o.lin->b;
    g.gelu = o.gelu;
    Tensor pre = o.gelu ? as2d(o.pre_gelu) : Tensor{};
    if (o.gelu) g.pre_gelu = &pre;
    matmul(s, as2d(o.y), as2d(x_full), o.lin->w, g);
  }
}

void column_parallel_backward(LlmContext& ctx, const Tensor& dx, const Tensor& dx_full, const Tensor& x_full,
                              std::initializer_list<ColumnGrad> grads) {
  Stream& s = ctx.stream;
  bool first = true;
  for (const ColumnGrad& g : grads) {
    weight_grads(s, *g.lin, g.dy, x_full);
    GemmOpts o;
    o.beta = first ? 0.f : 1.f;
    matmul(s, as2d(dx_full), as2d(g.dy), g.lin->w, o);
    first = false;
  }
  if (ctx.seq_parallel())
    gather_from_sequence_region_backward(s, ctx.tp, dx, dx_full);
  else
    copy_to_region_backward(s, ctx.tp, dx, dx_full);
}

void row_parallel_forward(LlmContext& ctx, const Tensor& y, const Tensor& y_partial, const Tensor& x,
                          const Linear& lin) {
  Stream& s = ctx.stream;
  GemmOpts g;
  g.trans_b = true;
  matmul(s, as2d(y_partial), as2d(x), lin.w, g);
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_forward(s, ctx.tp, y, y_partial);
  else
    reduce_from_region_forward(s, ctx.tp, y, y_partial);
  if (lin.b.defined()) bias_add(s, as2d(y), as2d(y), lin.b);
}

void row_parallel_backward(LlmContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                           const Tensor& x, const Linear& lin) {
  Stream& s = ctx.stream;
  if (lin.b.defined()) bias_backward(s, lin.db, as2d(dy));
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_backward(s, ctx.tp, dy_full, dy);
  else
    reduce_from_region_backward(s, ctx.tp, dy_full, dy);
  GemmOpts o;
  o.trans_a = true;
  o.beta = 1.f;
  matmul(s, lin.dw, as2d(dy_full), as2d(x), o);
  GemmOpts d;
  matmul(s, as2d(dx), as2d(dy_full), lin.w, d);
}

}  // namespace vlm

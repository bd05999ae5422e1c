// Linear, column- and row-parallel linear layers; math in linear.h.
#include "nn/linear.h"

#include "core/ops.h"
#include "nn/tp_side.h"
#include "parallel/regions.h"

namespace vlm {

namespace {

// [T, ...] viewed as [T, features] (q/k/v are [T, heads, HS]).
Tensor as2d(const Tensor& t) { return t.view(Shape{t.size(0), t.numel() / t.size(0)}); }

}  // namespace

Linear Linear::bind(const ParamTable& t, const std::string& weight, const std::string& bias) {
  Linear l;
  l.w = t.get(weight).work.defined() ? t.get(weight).work : t.get(weight).value;
  l.dw = t.get(weight).grad;
  if (!bias.empty()) {
    l.b = t.get(bias).value;
    l.db = t.get(bias).grad;
  }
  return l;
}

Linear Linear::rows(int64_t r0, int64_t r1) const {
  Linear o;
  o.w = w.slice(r0, r1);
  if (dw.defined()) o.dw = dw.slice(r0, r1);
  if (b.defined()) {
    o.b = b.slice(r0, r1);
    if (db.defined()) o.db = db.slice(r0, r1);
  }
  return o;
}

void Linear::forward(Stream& s, const Tensor& y, const Tensor& x, const Tensor& pre_gelu) const {
  GemmOpts g;
  g.trans_b = true;
  if (b.defined()) g.bias = &b;
  const Tensor pre = pre_gelu.defined() ? as2d(pre_gelu) : Tensor{};
  if (pre_gelu.defined()) {
    g.gelu = true;
    g.pre_gelu = &pre;
  }
  matmul(s, as2d(y), as2d(x), w, g);
}

void Linear::backward(Stream& s, const Tensor& dx, const Tensor& dy, const Tensor& x, float dx_beta) const {
  backward_input(s, dx, dy, dx_beta);
  backward_weights(s, dy, x);
}

void Linear::backward_input(Stream& s, const Tensor& dx, const Tensor& dy, float dx_beta) const {
  GemmOpts d;
  d.beta = dx_beta;
  matmul(s, as2d(dx), as2d(dy), w, d);
}

void Linear::backward_weights(Stream& s, const Tensor& dy, const Tensor& x) const {
  GemmOpts o;
  o.trans_a = true;
  o.beta = 1.f;
  if (dw.defined()) matmul(s, dw, as2d(dy), as2d(x), o);  // undefined: a frozen weight (nn/param_table.h)
  if (b.defined() && db.defined()) bias_backward(s, db, as2d(dy));
}

void column_parallel_forward(TpContext& ctx, const Tensor& x_full, const Tensor& x,
                             std::initializer_list<ColumnOut> outs) {
  Stream& s = ctx.stream;
  if (ctx.seq_parallel())
    gather_from_sequence_region_forward(s, ctx.tp, x_full, x);
  else
    copy_to_region_forward(s, ctx.tp, x_full, x);
  for (const ColumnOut& o : outs) o.lin->forward(s, o.y, x_full, o.pre_gelu);
}

void column_parallel_backward(TpContext& ctx, const Tensor& dx, const Tensor& dx_full, const Tensor& x_full,
                              std::initializer_list<ColumnGrad> grads) {
  Stream& s = ctx.stream;
  float beta = 0.f;  // the first output overwrites dx_full, the others add to it
  for (const ColumnGrad& g : grads) {
    g.lin->backward_input(s, dx_full, g.dy, beta);
    beta = 1.f;
  }
  Communicator& tp = ctx.tp;
  const bool sp = ctx.seq_parallel();
  const auto reduce = [&tp, sp, dx, dx_full](Stream& rs) {
    if (sp)
      gather_from_sequence_region_backward(rs, tp, dx, dx_full);
    else
      copy_to_region_backward(rs, tp, dx, dx_full);
  };
  const bool side = ctx.side != nullptr && tp.size() > 1;
  if (side)
    ctx.side->fork(s, reduce);
  else
    reduce(s);
  for (const ColumnGrad& g : grads) g.lin->backward_weights(s, g.dy, x_full);
  if (side) ctx.side->join(s);
}

void row_parallel_forward(TpContext& ctx, const Tensor& y, const Tensor& y_partial, const Tensor& x,
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

void row_parallel_backward(TpContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                           const Tensor& x, const Linear& lin) {
  row_parallel_backward_input(ctx, dx, dy_full, dy, lin);
  row_parallel_backward_weights(ctx.stream, dy_full, x, lin);
}

void row_parallel_backward_input(TpContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                                 const Linear& lin, const Tensor* dgelu_pre) {
  Stream& s = ctx.stream;
  if (lin.b.defined() && lin.db.defined()) bias_backward(s, lin.db, as2d(dy));
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_backward(s, ctx.tp, dy_full, dy);
  else
    reduce_from_region_backward(s, ctx.tp, dy_full, dy);
  GemmOpts d;
  const Tensor pre = dgelu_pre ? as2d(*dgelu_pre) : Tensor{};
  if (dgelu_pre) d.dgelu_pre = &pre;
  matmul(s, as2d(dx), as2d(dy_full), lin.w, d);
}

void row_parallel_backward_weights(Stream& s, const Tensor& dy_full, const Tensor& x, const Linear& lin) {
  GemmOpts o;
  o.trans_a = true;
  o.beta = 1.f;
  if (lin.dw.defined()) matmul(s, lin.dw, as2d(dy_full), as2d(x), o);
}

}  // namespace vlm

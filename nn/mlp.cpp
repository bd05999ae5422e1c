// Tensor-parallel MLP (GELU or SwiGLU); see mlp.h.
#include "nn/mlp.h"

#include "core/ops.h"

namespace vlm {

void Mlp::forward(TpContext& ctx, const Tensor& x, const Tensor& y, const MlpActs& a, const Scratch& sc) const {
  if (kind == MlpKind::SwiGLU) {
    column_parallel_forward(ctx, a.x_full, x, {{&gate, a.h1}, {&up, a.h2}});
    swiglu_forward(ctx.stream, a.act, a.h1, a.h2);
  } else {
    column_parallel_forward(ctx, a.x_full, x, {{&up, a.act, a.h1}});
  }
  row_parallel_forward(ctx, y, sc.partial, a.act, down);
}

void Mlp::backward(TpContext& ctx, const Tensor& dx, const Tensor& dy, const MlpActs& a, const Scratch& sc) const {
  Stream& s = ctx.stream;
  const Tensor dy_full = ctx.seq_parallel() ? sc.dfull_a : dy;
  if (kind == MlpKind::SwiGLU) {
    row_parallel_backward_input(ctx, sc.dact, dy_full, dy, down);
    swiglu_backward(s, sc.dh1, sc.dh2, a.act, sc.dact, a.h1, a.h2);  // a.act recomputed (mlp.h)
    row_parallel_backward_weights(s, dy_full, a.act, down);
    column_parallel_backward(ctx, dx, sc.dfull_b, a.x_full, {{&gate, sc.dh1}, {&up, sc.dh2}});
  } else {
    // dh1 = (dy W_down) * gelu'(h1) in one GEMM (the dGELU epilogue), then dW_down.
    row_parallel_backward_input(ctx, sc.dh1, dy_full, dy, down, &a.h1);
    row_parallel_backward_weights(s, dy_full, a.act, down);
    column_parallel_backward(ctx, dx, sc.dfull_b, a.x_full, {{&up, sc.dh1}});
  }
}

}  // namespace vlm

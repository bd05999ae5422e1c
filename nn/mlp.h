// Tensor-parallel MLP. Column-parallel up (and gate) projections, row-parallel down
// projection; hidden width split: Fl = F/tp.
//   GELU  : act = GELU_tanh(x W_up^T + b_up)            (GELU fused in the matmul epilogue)
//   SwiGLU: act = silu(x W_gate^T + b) * (x W_up^T + b)  (gate and up share one region)
//   y [Ts,C] = row region(act W_down^T) + b_down (bias once, after the reduction)
// Biases are optional (Linear::b undefined = none). GELU's backward: the down
// projection's input gradient is multiplied by GELU's derivative in its GEMM's epilogue
// (GemmOpts::dgelu_pre at the saved pre-activation): one kernel, no separate pass.
// Fused SwiGLU (docs/ops.md, "Fused ops"): backward gets act again from the SwiGLU
// backward op, which recomputes it while it computes dgate and dup, before the down
// projection's weight gradient reads it; so a SwiGLU layer keeps gate and up for
// backward, not act (the stack plans act as shared scratch: nn/activations.h).
// Gradients follow the rule of nn/context.h.
#pragma once
#include "nn/activations.h"
#include "nn/context.h"
#include "nn/linear.h"

namespace vlm {

enum class MlpKind { GeluTanh, SwiGLU };

struct Mlp {
  MlpKind kind = MlpKind::GeluTanh;
  Linear gate, up, down;  // gate only for SwiGLU

  void forward(TpContext& ctx, const Tensor& x, const Tensor& y, const MlpActs& a, const Scratch& sc) const;
  void backward(TpContext& ctx, const Tensor& dx, const Tensor& dy, const MlpActs& a, const Scratch& sc) const;
};

}  // namespace vlm

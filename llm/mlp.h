// Tensor-parallel MLP. Column-parallel up (and gate) projections, row-parallel down
// projection; hidden width split: Fl = F/tp.
//   gpt2 : act = GELU_tanh(x W_up^T + b_up)      (GELU fused in the matmul epilogue)
//   llama: act = silu(x W_gate^T) * (x W_up^T)    (SwiGLU; gate and up share one region)
//   y [Ts,C] = row region(act W_down^T) + b_down (bias once, after the reduction)
// Gradient rule: parameter grads += ; dx = (overwrite).
#pragma once
#include "llm/activations.h"
#include "llm/context.h"
#include "llm/linear_parallel.h"

namespace vlm {

struct Mlp {
  bool swiglu = false;
  Linear gate, up, down;  // gate only for SwiGLU

  void forward(LlmContext& ctx, const Tensor& x, const Tensor& y, const MlpActs& a, const Scratch& sc) const;
  void backward(LlmContext& ctx, const Tensor& dx, const Tensor& dy, const MlpActs& a, const Scratch& sc) const;
};

}  // namespace vlm

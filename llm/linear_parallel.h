// Column- and row-parallel linear layers (Megatron), built from the TP region
// operators (parallel/regions.h) and the matmul op. Weights use the HF layout
// W [out, in]: y = x W^T + b.
//
// ColumnParallelLinear: W split by output rows; y_j[T, out_j/tp] = x_full W_j^T + b_j.
//   Several weights may share one input region (q/k/v, gate/up): one communication.
//   input region fwd: x_full = x (copy-to-region)        | SP: all-gather x [Ts,C] -> [T,C]
//   input region bwd: dx = all-reduce(sum_j dy_j W_j)    | SP: reduce-scatter -> [Ts,C]
// RowParallelLinear: W split by input cols; y_partial[T,C] = x[T,in/tp] W^T (no bias);
//   output region fwd: y = all-reduce(y_partial) + b     | SP: reduce-scatter -> [Ts,C] + b
//   output region bwd: dy_full = dy (identity)           | SP: all-gather dy -> [T,C]
//   The bias is added ONCE, after the reduction; under SP its gradient is partial per
//   rank (finalize_grads reduces it).
// Gradient rule: dW, db += ; dx = (overwrite).
#pragma once
#include <initializer_list>
#include <utility>

#include "core/tensor.h"
#include "llm/context.h"

namespace vlm {

// The local shard of one linear layer and its gradients (views into the arenas).
struct Linear {
  Tensor w, dw;  // [out_l, in_l]
  Tensor b, db;  // [out_l], undefined when the layer has no bias
};

// One output of a column-parallel layer: y = x_full W^T + b (-> GELU: pre_gelu keeps
// the value before it).
struct ColumnOut {
  ColumnOut(const Linear* l, Tensor y_, bool gelu_ = false, Tensor pre = Tensor{})
      : lin(l), y(std::move(y_)), gelu(gelu_), pre_gelu(std::move(pre)) {}
  const Linear* lin;
  Tensor y;  // [T, out_l]
  bool gelu;
  Tensor pre_gelu;  // [T, out_l] when gelu
};
struct ColumnGrad {
  const Linear* lin;
  Tensor dy;  // [T, out_l]
};

// x [Ts,C] -> x_full [T,C] (may be the same tensor as x without SP) -> every output.
void column_parallel_forward(LlmContext& ctx, const Tensor& x_full, const Tensor& x,
                             std::initializer_list<ColumnOut> outs);
// dW_j += dy_j^T x_full, db_j += sum dy_j; dx_full = sum_j dy_j W_j (scratch [T,C]);
// dx [Ts,C] = input-region backward of dx_full (dx may alias dx_full without SP).
void column_parallel_backward(LlmContext& ctx, const Tensor& dx, const Tensor& dx_full, const Tensor& x_full,
                              std::initializer_list<ColumnGrad> grads);

// y [Ts,C] = output region of (x [T,in_l] W^T) + b; y_partial [T,C] is scratch (y may
// alias it without SP).
void row_parallel_forward(LlmContext& ctx, const Tensor& y, const Tensor& y_partial, const Tensor& x,
                          const Linear& lin);
// dy [Ts,C] -> dy_full [T,C] (scratch; may alias dy without SP); db += sum dy;
// dW += dy_full^T x; dx [T,in_l] = dy_full W.
void row_parallel_backward(LlmContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                           const Tensor& x, const Linear& lin);

}  // namespace vlm

// Linear layers: the replicated Linear and the column- and row-parallel linears
// (Megatron), the latter built from the TP region operators (parallel/regions.h) and the
// matmul op. Weights use the HF layout W [out, in]: y = x W^T + b.
//
// Linear: one layer's local weights (and optional bias) with their gradients; forward/
//   backward without communication (a replicated layer, or the local part of a TP one).
// ColumnParallelLinear: W split by output rows; y_j[T, out_j/tp] = x_full W_j^T + b_j.
//   Several weights may share one input region (q/k/v, gate/up): one communication.
//   input region fwd: x_full = x (copy-to-region)        | SP: all-gather x [Ts,C] -> [T,C]
//   input region bwd: dx = all-reduce(sum_j dy_j W_j)    | SP: reduce-scatter -> [Ts,C]
// RowParallelLinear: W split by input cols; y_partial[T,C] = x[T,in/tp] W^T (no bias);
//   output region fwd: y = all-reduce(y_partial) + b     | SP: reduce-scatter -> [Ts,C] + b
//   output region bwd: dy_full = dy (identity)           | SP: all-gather dy -> [T,C]
//   The bias is added ONCE, after the reduction; under SP its gradient is partial per
//   rank (ParamSpec::tp_partial_grad; ParamTable::finalize_tp_grads reduces it).
// At tp = 1 both are the plain Linear (the regions are identities).
// Gradients follow the rule of nn/context.h.
// Mixed precision (train.precision=bf16, docs/training.md, "Numerics"): bind() takes the table's
// bf16 working copy of the weight when it has one (nn/param_table.h), and the owner's
// activations are bf16 tensors (nn/act_plan.h); every matmul is then a bf16 GEMM with
// f32 accumulation (core/ops/gemm.inc) whose outputs (y, pre_gelu, dx) are bf16, and
// dW/db accumulate in f32; the region ops move the bf16 activations as they are.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>

#include "core/tensor.h"
#include "nn/context.h"
#include "nn/param_table.h"

namespace vlm {

// The local shard of one linear layer and its gradients (views into the arenas).
struct Linear {
  // [out_l, in_l]; w: the weights the matmuls read (bf16 working copy or f32 values); dw
  // (and db) f32, undefined when frozen: no weight gradients
  Tensor w, dw;
  Tensor b, db;  // [out_l], undefined when the layer has no bias

  // Views of parameter `weight` (and `bias`, unless empty) of `t`; aborts if unknown.
  static Linear bind(const ParamTable& t, const std::string& weight, const std::string& bias = "");
  // Output rows [r0, r1) of this layer (weight rows and bias entries).
  Linear rows(int64_t r0, int64_t r1) const;
  // Whether the layer runs in bf16 (its weights are a bf16 working copy).
  bool bf16() const { return w.defined() && w.dtype() == DType::BF16; }

  // y [N,out_l] = x [N,in_l] W^T (+ b); with pre_gelu defined: pre_gelu = that value,
  // y = GELU_tanh(pre_gelu) (fused epilogue). x and y may be [N, ...] (viewed as 2-D).
  void forward(Stream& s, const Tensor& y, const Tensor& x, const Tensor& pre_gelu = Tensor{}) const;
  // dW += dy^T x, db += sum_rows dy; dx = dy W (dx_beta = 0: overwrite, 1: add into dx).
  // backward = backward_input then backward_weights (independent products).
  void backward(Stream& s, const Tensor& dx, const Tensor& dy, const Tensor& x, float dx_beta = 0.f) const;
  void backward_input(Stream& s, const Tensor& dx, const Tensor& dy, float dx_beta = 0.f) const;
  void backward_weights(Stream& s, const Tensor& dy, const Tensor& x) const;  // nothing when frozen
};

// One output of a column-parallel layer: y = x_full W^T + b (then GELU when pre_gelu is
// given: it keeps the value before the GELU).
struct ColumnOut {
  ColumnOut(const Linear* l, Tensor y_, Tensor pre = Tensor{}) : lin(l), y(std::move(y_)), pre_gelu(std::move(pre)) {}
  const Linear* lin;
  Tensor y;         // [T, out_l]
  Tensor pre_gelu;  // [T, out_l], or undefined (no GELU)
};
struct ColumnGrad {
  const Linear* lin;
  Tensor dy;  // [T, out_l]
};

// x [Ts,C] -> x_full [T,C] (may be the same tensor as x without SP) -> every output.
void column_parallel_forward(TpContext& ctx, const Tensor& x_full, const Tensor& x,
                             std::initializer_list<ColumnOut> outs);
// dW_j += dy_j^T x_full, db_j += sum dy_j; dx_full = sum_j dy_j W_j (scratch [T,C]);
// dx [Ts,C] = input-region backward of dx_full (dx may alias dx_full without SP). The
// input gradient comes first; with ctx.side its reduction runs during the weight
// gradients (nn/tp_side.h).
void column_parallel_backward(TpContext& ctx, const Tensor& dx, const Tensor& dx_full, const Tensor& x_full,
                              std::initializer_list<ColumnGrad> grads);

// y [Ts,C] = output region of (x [T,in_l] W^T) + b; y_partial [T,C] is scratch (y may
// alias it without SP).
void row_parallel_forward(TpContext& ctx, const Tensor& y, const Tensor& y_partial, const Tensor& x,
                          const Linear& lin);
// dy [Ts,C] -> dy_full [T,C] (scratch; may alias dy without SP); db += sum dy;
// dW += dy_full^T x; dx [T,in_l] = dy_full W. = row_parallel_backward_input, then
// row_parallel_backward_weights (the MLP's SwiGLU recomputes x in between: nn/mlp.h).
void row_parallel_backward(TpContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                           const Tensor& x, const Linear& lin);
// dy -> dy_full (output region backward), db += sum dy, dx = dy_full W; with dgelu_pre
// (the input of a GELU whose output was x, dx's shape): dx = (dy_full W) * gelu'(dgelu_pre),
// the GELU's backward in the GEMM's epilogue (core/ops.h, GemmOpts::dgelu_pre).
void row_parallel_backward_input(TpContext& ctx, const Tensor& dx, const Tensor& dy_full, const Tensor& dy,
                                 const Linear& lin, const Tensor* dgelu_pre = nullptr);
// dW += dy_full^T x (nothing when frozen).
void row_parallel_backward_weights(Stream& s, const Tensor& dy_full, const Tensor& x, const Linear& lin);

}  // namespace vlm

// Projector: the LLaVA-1.5 style 2-layer MLP from the encoder width d_v to the
// backbone width C, applied row by row to visual tokens (replicated on every rank):
//   h   = x W1^T + b1          W1 [C, d_v], b1 [C]     multi_modal_projector.linear_1.*
//   a   = GELU(h)              the op library's tanh GELU (LLaVA's checkpoints use the
//                              exact erf GELU: they differ by < 1e-3 of h; no import)
//   y   = a W2^T + b2          W2 [C, C],  b2 [C]      multi_modal_projector.linear_2.*
// Weights N(0, init_std), biases 0. One ParamTable (replicated, f32, or f64 on CPU for
// gradient checks) and one ActPlan for at most max_tokens rows, cut per call.
// Gradients follow the rule of nn/context.h: parameter grads +=, dx overwritten.
// The projector is neither copied nor moved (its plan binds fields by address).
#pragma once
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "nn/act_plan.h"
#include "nn/linear.h"
#include "nn/param_table.h"

namespace vlm {

inline constexpr const char* kProjector1Weight = "multi_modal_projector.linear_1.weight";
inline constexpr const char* kProjector1Bias = "multi_modal_projector.linear_1.bias";
inline constexpr const char* kProjector2Weight = "multi_modal_projector.linear_2.weight";
inline constexpr const char* kProjector2Bias = "multi_modal_projector.linear_2.bias";

class Projector {
 public:
  // grads = false: frozen, no gradient arena (nn/param_table.h). dp: the table's ZeRO
  // sharding (nn/param_layout.h).
  Projector(int64_t d_in, int64_t d_out, float init_std, Backend& backend, int64_t max_tokens,
            DType dtype = DType::F32, bool grads = true, Precision precision = Precision::FP32, DpSharding dp = {});
  Projector(const Projector&) = delete;
  Projector& operator=(const Projector&) = delete;

  int64_t d_in() const { return d_in_; }
  int64_t d_out() const { return d_out_; }
  ParamTable& params() { return *params_; }
  const ParamTable& params() const { return *params_; }
  void init(uint64_t seed);  // nn/init.h
  void zero_grads() { params_->zero_grads(); }
  size_t activation_bytes() const { return acts_.bytes(); }  // the planned arena, exact

  // x [N, d_in] -> y [N, d_out], N <= max_tokens; keeps h and a for backward.
  void forward(Stream& s, const Tensor& y, const Tensor& x);
  // After forward(x): dy [N, d_out] -> dx [N, d_in] (overwrite; skipped when
  // undefined), parameter grads +=.
  void backward(Stream& s, const Tensor& dx, const Tensor& dy, const Tensor& x);

 private:
  int64_t d_in_, d_out_, max_tokens_;
  std::unique_ptr<ParamTable> params_;
  Linear l1_, l2_;
  ActPlan acts_;
  Tensor h_, a_, da_;  // [N, d_out]: before GELU, after it, gradient of a (then of h)
  int64_t last_N_ = 0;
};

}  // namespace vlm

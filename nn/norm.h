// Replicated normalisation layers over the last dimension C of x [Ts, C]: LayerNorm
// (weight and bias) or RMSNorm (weight only). On the residual stream under SP the rows
// are sequence shards, so the weight gradient is partial per rank (tp_partial_grad).
// Saved for backward: mean [Ts] (LayerNorm only; undefined for RMSNorm) and rstd [Ts].
// Activations (x, out, dx) are f32 or bf16 (train.precision=bf16); the weights, their
// gradients and the statistics stay f32 (docs/training.md, "Numerics").
// Gradients follow the rule of nn/context.h. The residual stream's adds fuse with the
// norms that read them (core/ops/norm.inc): forward_add computes sum = a + b and the
// norm of sum in one op; backward_add adds the input gradient into the residual
// stream's gradient instead of writing it.
#pragma once
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "nn/param_table.h"

namespace vlm {

enum class NormKind { LayerNorm, RMSNorm };

struct Norm {
  NormKind kind = NormKind::LayerNorm;
  float eps = 1e-5f;
  Tensor w, dw;  // [C]
  Tensor b, db;  // [C] (LayerNorm only)

  bool has_bias() const { return kind == NormKind::LayerNorm; }
  // The parameters of one norm: `weight` [C] (init 1) and, for LayerNorm, `bias` [C]
  // (init 0), replicated; tp_partial_grad when they act on sequence shards (SP).
  static std::vector<ParamSpec> param_specs(NormKind kind, int64_t C, const std::string& weight,
                                            const std::string& bias, bool tp_partial_grad);
  // Views of the parameters above in `t`.
  static Norm bind(const ParamTable& t, NormKind kind, float eps, const std::string& weight,
                   const std::string& bias);

  void forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x) const;
  // sum = a + b (sum may be a), then forward(out, mean, rstd, sum).
  void forward_add(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                   const Tensor& a, const Tensor& b) const;
  void backward(Stream& s, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                const Tensor& rstd) const;
  // dres += dx (the residual stream's gradient), dw/db += as backward.
  void backward_add(Stream& s, const Tensor& dres, const Tensor& dout, const Tensor& x, const Tensor& mean,
                    const Tensor& rstd) const;
};

}  // namespace vlm

// Replicated normalisation layers over the last dimension C of x [Ts, C]: LayerNorm
// (weight and bias) or RMSNorm (weight only). On the residual stream under SP the rows
// are sequence shards, so the weight gradient is partial per rank (tp_partial_grad).
// Saved for backward: mean [Ts] (LayerNorm only; undefined for RMSNorm) and rstd [Ts].
// Gradients follow the rule of nn/context.h.
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
  // train.precision=bf16 (the table has a bf16 working copy): out and dx are rounded to
  // bf16; the statistics (mean, rstd) and the weights stay f32.
  bool bf16 = false;

  bool has_bias() const { return kind == NormKind::LayerNorm; }
  // The parameters of one norm: `weight` [C] (init 1) and, for LayerNorm, `bias` [C]
  // (init 0), replicated; tp_partial_grad when they act on sequence shards (SP).
  static std::vector<ParamSpec> param_specs(NormKind kind, int64_t C, const std::string& weight,
                                            const std::string& bias, bool tp_partial_grad);
  // Views of the parameters above in `t`.
  static Norm bind(const ParamTable& t, NormKind kind, float eps, const std::string& weight,
                   const std::string& bias);

  void forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x) const;
  void backward(Stream& s, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                const Tensor& rstd) const;
};

}  // namespace vlm

// Replicated normalisation layers: LayerNorm (gpt2: weight and bias) or RMSNorm
// (llama: weight only), over the last dimension C of x [Ts, C] (the residual stream,
// on sequence shards under SP: then the weight gradient is partial per rank and is
// all-reduced by Backbone::finalize_grads).
// Saved for backward: mean [Ts] (LayerNorm only) and rstd [Ts].
// Gradient rule: dw, db += ; dx = (overwrite).
#pragma once
#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

struct Norm {
  bool rms = false;
  float eps = 1e-5f;
  Tensor w, dw;  // [C]
  Tensor b, db;  // [C] (LayerNorm only)

  void forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x) const;
  void backward(Stream& s, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                const Tensor& rstd) const;
};

}  // namespace vlm

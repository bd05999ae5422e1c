// LayerNorm / RMSNorm wrappers over the norm ops; see norm.h.
#include "llm/norm.h"

#include "core/ops.h"

namespace vlm {

void Norm::forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x) const {
  if (rms)
    rmsnorm_forward(s, out, rstd, x, w, eps);
  else
    layernorm_forward(s, out, mean, rstd, x, w, b, eps);
}

void Norm::backward(Stream& s, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                    const Tensor& rstd) const {
  if (rms)
    rmsnorm_backward(s, dx, dw, dout, x, w, rstd);
  else
    layernorm_backward(s, dx, dw, db, dout, x, w, mean, rstd);
}

}  // namespace vlm

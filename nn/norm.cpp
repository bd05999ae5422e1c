// LayerNorm / RMSNorm wrappers over the norm ops; see norm.h.
#include "nn/norm.h"

#include "core/ops.h"

namespace vlm {

std::vector<ParamSpec> Norm::param_specs(NormKind kind, int64_t C, const std::string& weight,
                                         const std::string& bias, bool tp_partial_grad) {
  std::vector<ParamSpec> v{param_spec(weight, Shape{C}, -1, InitKind::Ones, 0.f, tp_partial_grad)};
  if (kind == NormKind::LayerNorm) v.push_back(param_spec(bias, Shape{C}, -1, InitKind::Zeros, 0.f, tp_partial_grad));
  return v;
}

Norm Norm::bind(const ParamTable& t, NormKind kind, float eps, const std::string& weight, const std::string& bias) {
  Norm n;
  n.kind = kind;
  n.eps = eps;
  n.w = t.get(weight).value;
  n.dw = t.get(weight).grad;
  if (n.has_bias()) {
    n.b = t.get(bias).value;
    n.db = t.get(bias).grad;
  }
  return n;
}

void Norm::forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x) const {
  if (kind == NormKind::RMSNorm)
    rmsnorm_forward(s, out, rstd, x, w, eps);
  else
    layernorm_forward(s, out, mean, rstd, x, w, b, eps);
}

void Norm::forward_add(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                       const Tensor& a, const Tensor& b_in) const {
  if (kind == NormKind::RMSNorm)
    add_rmsnorm_forward(s, sum, out, rstd, a, b_in, w, eps);
  else
    add_layernorm_forward(s, sum, out, mean, rstd, a, b_in, w, b, eps);
}

void Norm::backward(Stream& s, const Tensor& dx, const Tensor& dout, const Tensor& x, const Tensor& mean,
                    const Tensor& rstd) const {
  if (kind == NormKind::RMSNorm)
    rmsnorm_backward(s, dx, dw, dout, x, w, rstd);
  else
    layernorm_backward(s, dx, dw, db, dout, x, w, mean, rstd);
}

void Norm::backward_add(Stream& s, const Tensor& dres, const Tensor& dout, const Tensor& x, const Tensor& mean,
                        const Tensor& rstd) const {
  if (kind == NormKind::RMSNorm)
    add_rmsnorm_backward(s, dres, dw, dout, x, w, rstd);
  else
    add_layernorm_backward(s, dres, dw, db, dout, x, w, mean, rstd);
}

}  // namespace vlm

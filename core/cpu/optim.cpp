// CPU AdamW step (core/ops/optim.inc), in place on master weights (f32; f64 accepted
// for checks). param, grad, m, v share shape and dtype; param_copy (optional) receives
// the updated weights converted to its dtype (f32, bf16 or f64). Per element, in
// the precision of the parameter:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p)
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void adamw_step(Stream& s, const Tensor& param, const Tensor& grad, const Tensor& m,
                const Tensor& v, const Tensor& param_copy, const AdamWOpts& o) {
  const char* op = "adamw_step";
  check_cpu(param, op, "param");
  check_same(grad, param, op, "grad");
  check_same(m, param, op, "m");
  check_same(v, param, op, "v");
  VLM_ASSERT(o.step >= 1, op, ": step ", o.step, " must be >= 1 (1-based)");
  if (param_copy.defined()) {
    check_cpu(param_copy, op, "param_copy");
    VLM_ASSERT(param_copy.numel() == param.numel(), op, ": param_copy ", param_copy.str(), " vs ", param.str());
  }
  dispatch_float(param.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T *p = param.ptr<T>(), *pm = m.ptr<T>(), *pv = v.ptr<T>();
    const T* g = grad.ptr<T>();
    const T b1 = T(o.beta1), b2 = T(o.beta2), lr = T(o.lr), eps = T(o.eps), wd = T(o.weight_decay);
    const T gs = T(o.grad_scale);
    const T c1 = T(1) - T(std::pow(double(o.beta1), o.step));
    const T c2 = T(1) - T(std::pow(double(o.beta2), o.step));
    const int64_t n = param.numel();
    const DType cd = param_copy.defined() ? param_copy.dtype() : param.dtype();
    VLM_ASSERT(cd == DType::F32 || cd == DType::F64 || cd == DType::BF16, op, ": param_copy dtype ",
               dtype_name(cd));
    void* copy = param_copy.defined() ? param_copy.data() : nullptr;
#pragma omp parallel for schedule(static) if (n > kOmpMin)
    for (int64_t i = 0; i < n; ++i) {
      const T gi = g[i] * gs;
      pm[i] = b1 * pm[i] + (T(1) - b1) * gi;
      pv[i] = b2 * pv[i] + (T(1) - b2) * gi * gi;
      const T mhat = pm[i] / c1, vhat = pv[i] / c2;
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
      if (!copy) continue;
      if (cd == DType::F32)
        static_cast<float*>(copy)[i] = float(p[i]);
      else if (cd == DType::F64)
        static_cast<double*>(copy)[i] = double(p[i]);
      else
        static_cast<bf16*>(copy)[i] = f32_to_bf16(float(p[i]));
    }
  });
}

}  // namespace vlm::cpu

// CUDA AdamW step (core/ops/optim.inc), fused, in place on f32 master weights:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p)
// One thread per element, same order of operations as the CPU reference. The bias
// corrections 1-b^t are computed once on the host in f64. param_copy (optional, f32 or
// bf16, same element count) receives the updated weights: the bf16 working copy.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

struct AdamConsts {
  float b1, b2, lr, eps, wd, gs, c1, c2;
};

__global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, void* copy, bool copy_bf16,
                             AdamConsts k, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float g = grad[i] * k.gs;
    const float mi = k.b1 * m[i] + (1.f - k.b1) * g;
    const float vi = k.b2 * v[i] + (1.f - k.b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / k.c1, vhat = vi / k.c2;
    float pi = p[i];
    pi -= k.lr * (mhat / (sqrtf(vhat) + k.eps) + k.wd * pi);
    p[i] = pi;
    if (copy) {
      if (copy_bf16)
        static_cast<__nv_bfloat16*>(copy)[i] = __float2bfloat16(pi);
      else
        static_cast<float*>(copy)[i] = pi;
    }
  }
}

}  // namespace

void adamw_step(Stream& s, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const Tensor& param_copy, const AdamWOpts& o) {
  const bool has_copy = param_copy.defined();
  const int64_t n = param.numel();
  if (n == 0) return;
  const AdamConsts k{o.beta1,
                     o.beta2,
                     o.lr,
                     o.eps,
                     o.weight_decay,
                     o.grad_scale,
                     float(1.0 - std::pow(double(o.beta1), o.step)),
                     float(1.0 - std::pow(double(o.beta2), o.step))};
  adamw_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(param), f32p(grad), f32p(m), f32p(v),
                                                          has_copy ? param_copy.data() : nullptr,
                                                          has_copy && param_copy.dtype() == DType::BF16, k, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

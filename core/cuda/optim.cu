// CUDA AdamW step (core/ops/optim.inc), fused, in place on f32 master weights:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p)
// Four elements per thread where the arrays are aligned, one otherwise; the same order of
// operations as the CPU reference. The bias corrections 1-b^t are computed once on the
// host in f64. param_copy (optional, f32 or bf16, same element count) receives the
// updated weights: the bf16 working copy.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

struct AdamConsts {
  float b1, b2, lr, eps, wd, gs, c1, c2;
};

// One element, in the CPU reference's order of operations; returns the new weight.
__device__ __forceinline__ float adam_one(float& p, float grad, float& m, float& v, const AdamConsts& k) {
  const float g = grad * k.gs;
  const float mi = k.b1 * m + (1.f - k.b1) * g;
  const float vi = k.b2 * v + (1.f - k.b2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi / k.c1, vhat = vi / k.c2;
  p -= k.lr * (mhat / (sqrtf(vhat) + k.eps) + k.wd * p);
  return p;
}

// Elements [0, n): one per thread; copy (null: none) receives the new weights.
__global__ void adamw_kernel(float* p, const float* grad, float* m, float* v, Act copy, AdamConsts k, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float pi = adam_one(p[i], grad[i], m[i], v[i], k);
    if (copy) copy.st(i, pi);
  }
}

// Elements [0, 4 n4): four per thread through 16-byte loads and stores (the step reads
// and writes about 30 bytes per weight, so it runs at the memory's speed or not at all);
// the same arithmetic per element as adamw_kernel, so the same bits.
__global__ void adamw4_kernel(float4* p, const float4* grad, float4* m, float4* v, Act copy, AdamConsts k,
                              int64_t n4) {
  VLM_GRID_STRIDE(i, n4) {
    float4 pi = p[i], mi = m[i], vi = v[i];
    const float4 gi = grad[i];
    adam_one(pi.x, gi.x, mi.x, vi.x, k);
    adam_one(pi.y, gi.y, mi.y, vi.y, k);
    adam_one(pi.z, gi.z, mi.z, vi.z, k);
    adam_one(pi.w, gi.w, mi.w, vi.w, k);
    p[i] = pi, m[i] = mi, v[i] = vi;
    if (copy) copy.st4(4 * i, pi);
  }
}

}  // namespace

void adamw_step(Stream& s, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const Tensor& param_copy, const AdamWOpts& o) {
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
  const Act copy = act(param_copy);  // null: no copy
  float *P = f32p(param), *M = f32p(m), *V = f32p(v);
  const float* G = f32p(grad);
  // Slices of the parameter pool are usually 16-byte aligned; the tail (n mod 4) and
  // unaligned arrays go one per thread.
  const int64_t n4 = quads(n, {Act{P}, Act{const_cast<float*>(G)}, Act{M}, Act{V}, copy});
  const int64_t done = 4 * n4;
  if (n4 > 0)
    adamw4_kernel<<<grid_1d(n4), kThreads, 0, stream_of(s)>>>(reinterpret_cast<float4*>(P),
                                                               reinterpret_cast<const float4*>(G),
                                                               reinterpret_cast<float4*>(M),
                                                               reinterpret_cast<float4*>(V), copy, k, n4);
  if (done < n) {
    const Act tail{copy ? static_cast<char*>(copy.p) + done * (copy.bf16 ? 2 : 4) : nullptr, copy.bf16};
    adamw_kernel<<<grid_1d(n - done), kThreads, 0, stream_of(s)>>>(P + done, G + done, M + done, V + done, tail, k,
                                                                   n - done);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

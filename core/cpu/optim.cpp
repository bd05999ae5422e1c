// CPU AdamW step (core/ops/optim.inc), in place on master weights (f32; f64 accepted
// for checks). param, grad, m, v share shape and dtype; param_copy (optional) receives
// the updated weights converted to its dtype (f32, bf16 or f64). Per element, in
// the precision of the parameter:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + weight_decay * p)
// Memory-bound (28 bytes per f32 parameter, 30 with a bf16 copy), so it is one fused
// pass: each thread takes a contiguous range (at least kGrainStream elements) and
// walks it in cache-sized blocks, updating p, m, v and then writing the copy of the
// block while it is still in cache. The f32 update is a branch-free loop compiled for
// AVX2+FMA and for baseline x86-64, chosen at run time (VLM_CPU_CLONES); without errno
// from sqrt and without FMA contraction (core/CMakeLists.txt) every element is rounded
// exactly as by the scalar formula above, whatever the vector width, block or thread.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

constexpr int64_t kBlock = 4096;  // elements per block: 4 arrays x 16 KB stay in L2

template <typename T>
struct AdamWConsts {
  T b1, b2, one_minus_b1, one_minus_b2, lr, eps, wd, gs, c1, c2;
};

template <typename T>
AdamWConsts<T> consts(const AdamWOpts& o) {
  AdamWConsts<T> c;
  c.b1 = T(o.beta1), c.b2 = T(o.beta2), c.lr = T(o.lr), c.eps = T(o.eps), c.wd = T(o.weight_decay);
  c.gs = T(o.grad_scale);
  c.one_minus_b1 = T(1) - c.b1, c.one_minus_b2 = T(1) - c.b2;
  c.c1 = T(1) - T(std::pow(double(o.beta1), o.step));
  c.c2 = T(1) - T(std::pow(double(o.beta2), o.step));
  return c;
}

// The update of n elements (the formula in the header, operation for operation).
template <typename T>
inline void adamw_block(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
                        const AdamWConsts<T>& k) {
  const T b1 = k.b1, b2 = k.b2, a1 = k.one_minus_b1, a2 = k.one_minus_b2, lr = k.lr, eps = k.eps, wd = k.wd,
          gs = k.gs, c1 = k.c1, c2 = k.c2;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] * gs;
    const T mi = b1 * m[i] + a1 * gi;
    const T vi = b2 * v[i] + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T mhat = mi / c1, vhat = vi / c2;
    p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
  }
}

VLM_CPU_CLONES void adamw_block_f32(float* p, const float* g, float* m, float* v, int64_t n,
                                    const AdamWConsts<float>& k) {
  adamw_block(p, g, m, v, n, k);
}

VLM_CPU_CLONES void copy_bf16(bf16* __restrict d, const float* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}

// param_copy[i] = p[i] converted to dtype cd, for i in [b, e).
template <typename T>
void write_copy(void* copy, DType cd, const T* p, int64_t b, int64_t e) {
  if (cd == DType::BF16) {
    if constexpr (std::is_same_v<T, float>) {
      copy_bf16(static_cast<bf16*>(copy) + b, p + b, e - b);
    } else {
      for (int64_t i = b; i < e; ++i) static_cast<bf16*>(copy)[i] = f32_to_bf16(float(p[i]));
    }
  } else if (cd == DType::F32) {
    for (int64_t i = b; i < e; ++i) static_cast<float*>(copy)[i] = float(p[i]);
  } else {
    for (int64_t i = b; i < e; ++i) static_cast<double*>(copy)[i] = double(p[i]);
  }
}

}  // namespace

void adamw_step(Stream& s, const Tensor& param, const Tensor& grad, const Tensor& m,
                const Tensor& v, const Tensor& param_copy, const AdamWOpts& o) {
  const char* op = "adamw_step";
  dispatch_float(param.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T *p = param.ptr<T>(), *pm = m.ptr<T>(), *pv = v.ptr<T>();
    const T* g = grad.ptr<T>();
    const AdamWConsts<T> k = consts<T>(o);
    const int64_t n = param.numel();
    const DType cd = param_copy.defined() ? param_copy.dtype() : param.dtype();
    void* copy = param_copy.defined() ? param_copy.data() : nullptr;
    parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t w = std::min(kBlock, e - i);
        if constexpr (std::is_same_v<T, float>)
          adamw_block_f32(p + i, g + i, pm + i, pv + i, w, k);
        else
          adamw_block(p + i, g + i, pm + i, pv + i, w, k);
        if (copy) write_copy(copy, cd, p, i, i + w);
      }
    });
  });
}

}  // namespace vlm::cpu

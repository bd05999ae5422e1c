// CPU activations (core/ops/elementwise.inc): tanh-GELU and SwiGLU, forward and
// backward. f32 and f64 (f32 GELU through the 4-lane vec_math.h kernels). Gradients
// are overwritten; din may alias dout (each element is read before it is written).
//   gelu(x)   = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
//   swiglu    = silu(gate) * up, silu(g) = g * sigmoid(g)
//   dgate     = dout * up * sigmoid(g) (1 + g (1 - sigmoid(g))),  dup = dout * silu(g)
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"

namespace vlm::cpu {

constexpr int64_t kChunk = 1024;  // f32 GELU: elements per parallel chunk (multiple of 4)

void gelu_forward(Stream& s, const Tensor& out, const Tensor& in) {
  dispatch_float(in.dtype(), "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const T* x = in.ptr<T>();
    const int64_t n = in.numel();
    if constexpr (std::is_same_v<T, float>) {  // vectorised (vec_math.h), chunks of kChunk
      const int64_t nc = (n + kChunk - 1) / kChunk;
      parallel_for(nc, kGrainMath / kChunk, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) gelu_f32(o + c * kChunk, x + c * kChunk, std::min(kChunk, n - c * kChunk));
      });
    } else {
      parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = gelu_tanh(x[i]);
      });
    }
  });
}

void gelu_backward(Stream& s, const Tensor& din, const Tensor& in, const Tensor& dout) {
  dispatch_float(in.dtype(), "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    T* d = din.ptr<T>();
    const T *x = in.ptr<T>(), *g = dout.ptr<T>();
    const int64_t n = in.numel();
    if constexpr (std::is_same_v<T, float>) {
      const int64_t nc = (n + kChunk - 1) / kChunk;
      parallel_for(nc, kGrainMath / kChunk, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
          gelu_grad_f32(d + c * kChunk, x + c * kChunk, g + c * kChunk, std::min(kChunk, n - c * kChunk));
      });
    } else {
      parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = g[i] * gelu_tanh_grad(x[i]);
      });
    }
  });
}

void swiglu_forward(Stream& s, const Tensor& out, const Tensor& gate, const Tensor& up) {
  dispatch_float(gate.dtype(), "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const T *g = gate.ptr<T>(), *u = up.ptr<T>();
    const int64_t n = gate.numel();
    parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T sig = T(1) / (T(1) + std::exp(-g[i]));
        o[i] = g[i] * sig * u[i];
      }
    });
  });
}

void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                     const Tensor& gate, const Tensor& up) {
  dispatch_float(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    T *dg = dgate.ptr<T>(), *du = dup.ptr<T>();
    const T *g = gate.ptr<T>(), *u = up.ptr<T>(), *d = dout.ptr<T>();
    const int64_t n = gate.numel();
    parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T x = g[i], dy = d[i], ui = u[i];  // read all before writing (aliasing)
        T sig = T(1) / (T(1) + std::exp(-x));
        dg[i] = dy * ui * sig * (T(1) + x * (T(1) - sig));
        du[i] = dy * x * sig;
      }
    });
  });
}

}  // namespace vlm::cpu

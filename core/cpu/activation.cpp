// CPU activations (core/ops/elementwise.inc): tanh-GELU and SwiGLU, forward and
// backward. f32, f64 and bf16 (computed in f32 and rounded once; f32 and bf16 GELU
// through the 4-lane vec_math.h kernels). Gradients are overwritten; din may alias dout
// (each element is read before it is written). swiglu_backward's optional `out` is
// swiglu_forward's value, computed by the same expression (bitwise equal).
//   gelu(x)   = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
//   swiglu    = silu(gate) * up, silu(g) = g * sigmoid(g)
//   dgate     = dout * up * sigmoid(g) (1 + g (1 - sigmoid(g))),  dup = dout * silu(g)
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"

namespace vlm::cpu {

constexpr int64_t kChunk = 1024;  // f32 GELU: elements per parallel chunk (multiple of 4)

namespace {

// f(c, o, x..., w) for the chunks c of kChunk elements of [0, n) of float arrays, in
// parallel: the f32 arrays themselves, or (bf16) f32 copies of the inputs' chunk and a
// f32 buffer for the output, rounded into it afterwards.
template <typename S, typename F>
void float_chunks(int64_t n, S* out, std::initializer_list<const S*> ins, F&& f) {
  const int64_t nc = (n + kChunk - 1) / kChunk;
  parallel_for(nc, kGrainMath / kChunk, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t at = c * kChunk, w = std::min(kChunk, n - at);
      if constexpr (std::is_same_v<S, float>) {
        const float* p[2] = {nullptr, nullptr};
        int k = 0;
        for (const float* in : ins) p[k++] = in + at;
        f(out + at, p[0], p[1], w);
      } else {
        float buf[3][kChunk];
        int k = 0;
        for (const S* in : ins) ld_n(buf[1 + k++], in + at, w);
        f(buf[0], buf[1], buf[2], w);
        st_n(out + at, buf[0], w);
      }
    }
  });
}

}  // namespace

void gelu_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  switch (in.dtype()) {  // f32 and bf16: vectorised (vec_math.h), chunks of kChunk
    case DType::F32:
      return float_chunks(n, out.ptr<float>(), {in.ptr<float>()},
                          [](float* o, const float* x, const float*, int64_t w) { gelu_f32(o, x, w); });
    case DType::BF16:
      return float_chunks(n, out.ptr<bf16>(), {in.ptr<bf16>()},
                          [](float* o, const float* x, const float*, int64_t w) { gelu_f32(o, x, w); });
    default: {
      double* o = out.ptr<double>();
      const double* x = in.ptr<double>();
      parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = gelu_tanh(x[i]);
      });
    }
  }
}

void gelu_backward(Stream& s, const Tensor& din, const Tensor& in, const Tensor& dout) {
  const int64_t n = in.numel();
  const auto grad = [](float* d, const float* x, const float* g, int64_t w) { gelu_grad_f32(d, x, g, w); };
  switch (in.dtype()) {
    case DType::F32: return float_chunks(n, din.ptr<float>(), {in.ptr<float>(), dout.ptr<float>()}, grad);
    case DType::BF16: return float_chunks(n, din.ptr<bf16>(), {in.ptr<bf16>(), dout.ptr<bf16>()}, grad);
    default: {
      double* d = din.ptr<double>();
      const double *x = in.ptr<double>(), *g = dout.ptr<double>();
      parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) d[i] = g[i] * gelu_tanh_grad(x[i]);
      });
    }
  }
}

void swiglu_forward(Stream& s, const Tensor& out, const Tensor& gate, const Tensor& up) {
  dispatch_act(gate.dtype(), "swiglu_forward", [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    S* o = out.ptr<S>();
    const S *g = gate.ptr<S>(), *u = up.ptr<S>();
    const int64_t n = gate.numel();
    parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T x = ld(g[i]);
        T sig = T(1) / (T(1) + std::exp(-x));
        o[i] = st<S>(x * sig * ld(u[i]));
      }
    });
  });
}

void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& out, const Tensor& dout,
                     const Tensor& gate, const Tensor& up) {
  dispatch_act(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    S *dg = dgate.ptr<S>(), *du = dup.ptr<S>(), *o = out.defined() ? out.ptr<S>() : nullptr;
    const S *g = gate.ptr<S>(), *u = up.ptr<S>(), *d = dout.ptr<S>();
    const int64_t n = gate.numel();
    parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T x = ld(g[i]), dy = ld(d[i]), ui = ld(u[i]);  // read all before writing (aliasing)
        T sig = T(1) / (T(1) + std::exp(-x));
        dg[i] = st<S>(dy * ui * sig * (T(1) + x * (T(1) - sig)));
        du[i] = st<S>(dy * x * sig);
        if (o) o[i] = st<S>(x * sig * ui);  // swiglu_forward's value, as it computes it
      }
    });
  });
}

}  // namespace vlm::cpu

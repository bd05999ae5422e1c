// CPU rotary position embedding (core/ops/rope.inc), "rotate half" (Llama/HF) layout.
// x[T,NH,HS], pos[T] i32, HS even, h = HS/2. For i < h, with
// angle = pos * theta^(-2i/HS) (computed in double):
//   forward:  out[i] = x[i] cos - x[i+h] sin;   out[i+h] = x[i+h] cos + x[i] sin
//   backward: din[i] = d[i] cos + d[i+h] sin;   din[i+h] = d[i+h] cos - d[i] sin
// out may alias in (each pair is read before it is written). Parallel over tokens; the
// angle tables live in per-thread scratch (no allocation per call).
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

// sign = +1 rotates forward, -1 applies the inverse rotation.
void rope_apply(const char* op, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, double sign) {
  const int64_t T_ = in.size(0), NH = in.size(1), HS = in.size(2), h = HS / 2;
  double* inv_freq = thread_scratch<double>(0, h);
  for (int64_t i = 0; i < h; ++i) inv_freq[i] = std::pow(double(theta), -2.0 * double(i) / double(HS));
  const int32_t* p = pos.ptr<int32_t>();
  dispatch_float(in.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    T* o = out.ptr<T>();
    parallel_for(T_, row_grain(NH * HS + 8 * h, kGrainMath), [&](int64_t t0, int64_t t1) {
      double* cs = thread_scratch<double>(1, 2 * h);
      double* sn = cs + h;
      for (int64_t t = t0; t < t1; ++t) {
        for (int64_t i = 0; i < h; ++i) {
          const double a = double(p[t]) * inv_freq[i];
          cs[i] = std::cos(a);
          sn[i] = sign * std::sin(a);
        }
        for (int64_t hd = 0; hd < NH; ++hd) {
          const int64_t base = (t * NH + hd) * HS;
          for (int64_t i = 0; i < h; ++i) {
            const double x1 = double(x[base + i]), x2 = double(x[base + i + h]);
            o[base + i] = T(x1 * cs[i] - x2 * sn[i]);
            o[base + i + h] = T(x2 * cs[i] + x1 * sn[i]);
          }
        }
      }
    });
  });
}

}  // namespace

void rope_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) {
  rope_apply("rope_forward", out, in, pos, theta, 1.0);
}

void rope_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) {
  rope_apply("rope_backward", din, dout, pos, theta, -1.0);
}

}  // namespace vlm::cpu

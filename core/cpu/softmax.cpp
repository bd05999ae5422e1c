// CPU softmax over the last dimension (core/ops/softmax.inc), forward and backward.
// in/out[N,C], f32 or f64. Forward subtracts the row max and sums in double;
// backward: din = out * (dout - sum(dout * out)) (overwrite). Parallel over rows,
// each row reduced in column order (deterministic).
#include <algorithm>
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void softmax_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t N = in.rows(), C = in.cols();
  dispatch_float(in.dtype(), "softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    T* o = out.ptr<T>();
    parallel_for(N, row_grain(C, kGrainMath), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const T* xr = x + n * C;
        T* orow = o + n * C;
        double mx = -INFINITY;
        for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(xr[c]));
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += std::exp(double(xr[c]) - mx);
        const double inv = 1.0 / sum;
        for (int64_t c = 0; c < C; ++c) orow[c] = T(std::exp(double(xr[c]) - mx) * inv);
      }
    });
  });
}

void softmax_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& out) {
  const int64_t N = out.rows(), C = out.cols();
  dispatch_float(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *y = out.ptr<T>(), *g = dout.ptr<T>();
    T* d = din.ptr<T>();
    parallel_for(N, row_grain(C, kGrainStream), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        double dot = 0;
        for (int64_t c = 0; c < C; ++c) dot += double(g[n * C + c]) * double(y[n * C + c]);
        for (int64_t c = 0; c < C; ++c) d[n * C + c] = T(double(y[n * C + c]) * (double(g[n * C + c]) - dot));
      }
    });
  });
}

}  // namespace vlm::cpu

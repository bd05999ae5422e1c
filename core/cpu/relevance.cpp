// CPU ops of the relevance scorers (core/ops/relevance.inc): sigmoid and per-row
// (mean, max, std), f32 or f64. Rows are reduced in column order, in double
// (deterministic); the maximum's gradient goes to its first occurrence. Parallel over
// elements or rows (core/cpu/thread_pool.h).
#include <algorithm>
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {

void sigmoid_forward(Stream&, const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  dispatch_float(in.dtype(), "sigmoid_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    T* y = out.ptr<T>();
    parallel_for(n, kGrainMath, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = T(1.0 / (1.0 + std::exp(-double(x[i]))));
    });
  });
}

void sigmoid_backward(Stream&, const Tensor& din, const Tensor& dout, const Tensor& out) {
  const int64_t n = out.numel();
  dispatch_float(out.dtype(), "sigmoid_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *y = out.ptr<T>(), *g = dout.ptr<T>();
    T* d = din.ptr<T>();
    parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = T(double(g[i]) * double(y[i]) * (1.0 - double(y[i])));
    });
  });
}

void row_stats_forward(Stream&, const Tensor& out, const Tensor& in, float eps) {
  const int64_t N = in.rows(), C = in.cols();
  dispatch_float(in.dtype(), "row_stats_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    T* o = out.ptr<T>();
    parallel_for(N, row_grain(C, kGrainStream), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const T* r = x + n * C;
        double sum = 0, mx = -INFINITY;
        for (int64_t c = 0; c < C; ++c) sum += double(r[c]), mx = std::max(mx, double(r[c]));
        const double mean = sum / double(C);
        double var = 0;
        for (int64_t c = 0; c < C; ++c) var += (double(r[c]) - mean) * (double(r[c]) - mean);
        o[n * 3 + 0] = T(mean);
        o[n * 3 + 1] = T(mx);
        o[n * 3 + 2] = T(std::sqrt(var / double(C) + double(eps)));
      }
    });
  });
}

void row_stats_backward(Stream&, const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& out) {
  const int64_t N = in.rows(), C = in.cols();
  dispatch_float(in.dtype(), "row_stats_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.ptr<T>(), *o = out.ptr<T>(), *g = dout.ptr<T>();
    T* d = din.ptr<T>();
    parallel_for(N, row_grain(C, kGrainStream), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const T* r = x + n * C;
        const double mean = double(o[n * 3]), mx = double(o[n * 3 + 1]), sd = double(o[n * 3 + 2]);
        const double gm = double(g[n * 3]) / double(C), gs = double(g[n * 3 + 2]) / (double(C) * sd);
        int64_t arg = 0;
        while (arg + 1 < C && double(r[arg]) != mx) ++arg;
        for (int64_t c = 0; c < C; ++c) d[n * C + c] = T(gm + gs * (double(r[c]) - mean));
        d[n * C + arg] = T(double(d[n * C + arg]) + double(g[n * 3 + 1]));
      }
    });
  });
}

}  // namespace vlm::cpu

// CPU norms over the last dimension (core/ops/norm.inc): layernorm and rmsnorm, forward
// and backward. in[N,C], w[C], b[C] (b/db may be undefined for a bias-free layernorm).
// Row statistics (mean, rstd [N]) are computed in double and saved as f32 (or f64 when
// the caller gives f64 statistics, for gradient checks). Backward reads them back.
// din is overwritten; dw, db accumulate. Parallel over rows for din; dw/db are
// reduced over rows in row order per column block (deterministic).
#include <algorithm>
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

constexpr int64_t kColBlock = 64;

// dw[c] += sum_n dout[n,c] * xhat(n,c); db[c] += sum_n dout[n,c] (db may be null).
template <typename T, typename Xhat>
void reduce_param_grads(int64_t N, int64_t C, const T* dout, T* dw, T* db, Xhat&& xhat) {
  const int64_t nblocks = (C + kColBlock - 1) / kColBlock;
  parallel_for(nblocks, row_grain(N * kColBlock, kGrainMath), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kColBlock, c1 = std::min(C, c0 + kColBlock);
      double aw[kColBlock] = {}, ab[kColBlock] = {};
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = c0; c < c1; ++c) {
          const double g = double(dout[n * C + c]);
          aw[c - c0] += g * xhat(n, c);
          ab[c - c0] += g;
        }
      for (int64_t c = c0; c < c1; ++c) {
        dw[c] += T(aw[c - c0]);
        if (db) db[c] += T(ab[c - c0]);
      }
    }
  });
}

// f(n) for every row n in [0, N) of C elements, in parallel when large.
template <typename F>
void for_rows(int64_t N, int64_t C, F&& f) {
  parallel_for(N, row_grain(C, kGrainMath), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) f(n);
  });
}

}  // namespace

void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                       const Tensor& in, const Tensor& w, const Tensor& b, float eps) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sm(mean), sr(rstd);
  dispatch_float(in.dtype(), "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.ptr<T>(), *pw = w.ptr<T>(), *pb = b.defined() ? b.ptr<T>() : nullptr;
    T* o = out.ptr<T>();
    for_rows(N, C, [&](int64_t n) {
      const T* xr = x + n * C;
      double mu = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mu += double(xr[c]);
      mu /= double(C);
      for (int64_t c = 0; c < C; ++c) var += (double(xr[c]) - mu) * (double(xr[c]) - mu);
      var /= double(C);
      const double r = 1.0 / std::sqrt(var + double(eps));
      for (int64_t c = 0; c < C; ++c) {
        double y = (double(xr[c]) - mu) * r * double(pw[c]);
        if (pb) y += double(pb[c]);
        o[n * C + c] = T(y);
      }
      sm.set(n, mu);
      sr.set(n, r);
    });
  });
}

void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db,
                        const Tensor& dout, const Tensor& in, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sm(mean), sr(rstd);
  dispatch_float(in.dtype(), "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.ptr<T>(), *g = dout.ptr<T>(), *pw = w.ptr<T>();
    T* dx = din.ptr<T>();
    auto xhat = [&](int64_t n, int64_t c) { return (double(x[n * C + c]) - sm.get(n)) * sr.get(n); };
    // Parameter gradients first: din may alias dout.
    if (dw.defined()) reduce_param_grads<T>(N, C, g, dw.ptr<T>(), db.defined() ? db.ptr<T>() : nullptr, xhat);
    for_rows(N, C, [&](int64_t n) {
      double mdx = 0, mdxx = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(g[n * C + c]) * double(pw[c]);
        mdx += d;
        mdxx += d * xhat(n, c);
      }
      mdx /= double(C);
      mdxx /= double(C);
      const double r = sr.get(n);
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(g[n * C + c]) * double(pw[c]);
        dx[n * C + c] = T(r * (d - mdx - xhat(n, c) * mdxx));
      }
    });
  });
}

void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in,
                     const Tensor& w, float eps) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sr(rstd);
  dispatch_float(in.dtype(), "rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.ptr<T>(), *pw = w.ptr<T>();
    T* o = out.ptr<T>();
    for_rows(N, C, [&](int64_t n) {
      double ms = 0;
      for (int64_t c = 0; c < C; ++c) ms += double(x[n * C + c]) * double(x[n * C + c]);
      const double r = 1.0 / std::sqrt(ms / double(C) + double(eps));
      for (int64_t c = 0; c < C; ++c) o[n * C + c] = T(double(x[n * C + c]) * r * double(pw[c]));
      sr.set(n, r);
    });
  });
}

void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout,
                      const Tensor& in, const Tensor& w, const Tensor& rstd) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sr(rstd);
  dispatch_float(in.dtype(), "rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = in.ptr<T>(), *g = dout.ptr<T>(), *pw = w.ptr<T>();
    T* dx = din.ptr<T>();
    auto xhat = [&](int64_t n, int64_t c) { return double(x[n * C + c]) * sr.get(n); };
    if (dw.defined()) reduce_param_grads<T>(N, C, g, dw.ptr<T>(), nullptr, xhat);
    for_rows(N, C, [&](int64_t n) {
      double mdxx = 0;
      for (int64_t c = 0; c < C; ++c) mdxx += double(g[n * C + c]) * double(pw[c]) * xhat(n, c);
      mdxx /= double(C);
      const double r = sr.get(n);
      for (int64_t c = 0; c < C; ++c)
        dx[n * C + c] = T(r * (double(g[n * C + c]) * double(pw[c]) - xhat(n, c) * mdxx));
    });
  });
}

}  // namespace vlm::cpu

// CPU norms over the last dimension (core/ops/norm.inc): layernorm and rmsnorm, forward
// and backward, and the fused residual add + norm. in[N,C], w[C], b[C] (b/db may be
// undefined for a bias-free layernorm). Row statistics (mean, rstd [N]) are computed in
// double and saved as f32 (or f64 when the caller gives f64 statistics, for gradient
// checks). Backward reads them back. din is overwritten (the add_ variants add it into
// dsum); dw, db accumulate. Parallel over rows for din; dw/db are reduced over rows in
// row order per column block (deterministic).
// Activations f32, f64 or bf16 (S, loaded as double; w, b, dw, db in compute_t<S>:
// cpu_util.h); an output is the double value stored through T = compute_t<S>, so a bf16
// result is the f32 one rounded. The fused forward writes a row's sum first and
// normalises the stored row with the same code as the plain forward.
#include <algorithm>
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

constexpr int64_t kColBlock = 64;

// dw[c] += sum_n dout[n,c] * xhat(n,c); db[c] += sum_n dout[n,c] (db may be null).
template <typename S, typename Xhat>
void reduce_param_grads(int64_t N, int64_t C, const S* dout, compute_t<S>* dw, compute_t<S>* db, Xhat&& xhat) {
  using T = compute_t<S>;
  const int64_t nblocks = (C + kColBlock - 1) / kColBlock;
  parallel_for(nblocks, row_grain(N * kColBlock, kGrainMath), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kColBlock, c1 = std::min(C, c0 + kColBlock);
      double aw[kColBlock] = {}, ab[kColBlock] = {};
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = c0; c < c1; ++c) {
          const double g = double(ld(dout[n * C + c]));
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

// The value v (computed in double) stored through T = compute_t<S> into *o, or added
// into it (the add_ backward variants: *o = *o + T(v), one rounding to S).
template <typename S>
inline void put(S* o, double v, bool add) {
  using T = compute_t<S>;
  *o = add ? st<S>(ld(*o) + T(v)) : st<S>(T(v));
}

// sum = a + b for the rows of x (the fused forward's first pass), or nothing.
template <typename S>
struct RowSum {
  S* sum = nullptr;
  const S *a = nullptr, *b = nullptr;
  void operator()(int64_t n, int64_t C) const {
    if (!sum) return;
    for (int64_t c = 0; c < C; ++c) sum[n * C + c] = st<S>(ld(a[n * C + c]) + ld(b[n * C + c]));
  }
};

template <typename S>
void layernorm_rows(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in, const Tensor& w,
                    const Tensor& b, float eps, const RowSum<S>& pre) {
  using T = compute_t<S>;
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sm(mean), sr(rstd);
  const S* x = in.ptr<S>();
  const T *pw = w.ptr<T>(), *pb = b.defined() ? b.ptr<T>() : nullptr;
  S* o = out.ptr<S>();
  for_rows(N, C, [&](int64_t n) {
    pre(n, C);
    const S* xr = x + n * C;
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += double(ld(xr[c]));
    mu /= double(C);
    for (int64_t c = 0; c < C; ++c) var += (double(ld(xr[c])) - mu) * (double(ld(xr[c])) - mu);
    var /= double(C);
    const double r = 1.0 / std::sqrt(var + double(eps));
    for (int64_t c = 0; c < C; ++c) {
      double y = (double(ld(xr[c])) - mu) * r * double(pw[c]);
      if (pb) y += double(pb[c]);
      put(o + n * C + c, y, false);
    }
    sm.set(n, mu);
    sr.set(n, r);
  });
}

template <typename S>
void rmsnorm_rows(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w, float eps,
                  const RowSum<S>& pre) {
  using T = compute_t<S>;
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sr(rstd);
  const S* x = in.ptr<S>();
  const T* pw = w.ptr<T>();
  S* o = out.ptr<S>();
  for_rows(N, C, [&](int64_t n) {
    pre(n, C);
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += double(ld(x[n * C + c])) * double(ld(x[n * C + c]));
    const double r = 1.0 / std::sqrt(ms / double(C) + double(eps));
    for (int64_t c = 0; c < C; ++c) put(o + n * C + c, double(ld(x[n * C + c])) * r * double(pw[c]), false);
    sr.set(n, r);
  });
}

// din = (add: +=) the layernorm input gradient; dw, db += when defined.
void layernorm_grads(const char* op, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout,
                     const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd, bool add) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sm(mean), sr(rstd);
  dispatch_act(in.dtype(), op, [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    const S *x = in.ptr<S>(), *g = dout.ptr<S>();
    const T* pw = w.ptr<T>();
    S* dx = din.ptr<S>();
    auto xhat = [&](int64_t n, int64_t c) { return (double(ld(x[n * C + c])) - sm.get(n)) * sr.get(n); };
    // Parameter gradients first: din may alias dout.
    if (dw.defined()) reduce_param_grads<S>(N, C, g, dw.ptr<T>(), db.defined() ? db.ptr<T>() : nullptr, xhat);
    for_rows(N, C, [&](int64_t n) {
      double mdx = 0, mdxx = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(ld(g[n * C + c])) * double(pw[c]);
        mdx += d;
        mdxx += d * xhat(n, c);
      }
      mdx /= double(C);
      mdxx /= double(C);
      const double r = sr.get(n);
      for (int64_t c = 0; c < C; ++c) {
        const double d = double(ld(g[n * C + c])) * double(pw[c]);
        put(dx + n * C + c, r * (d - mdx - xhat(n, c) * mdxx), add);
      }
    });
  });
}

void rmsnorm_grads(const char* op, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in,
                   const Tensor& w, const Tensor& rstd, bool add) {
  const int64_t N = in.rows(), C = in.cols();
  const StatRef sr(rstd);
  dispatch_act(in.dtype(), op, [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    const S *x = in.ptr<S>(), *g = dout.ptr<S>();
    const T* pw = w.ptr<T>();
    S* dx = din.ptr<S>();
    auto xhat = [&](int64_t n, int64_t c) { return double(ld(x[n * C + c])) * sr.get(n); };
    if (dw.defined()) reduce_param_grads<S>(N, C, g, dw.ptr<T>(), nullptr, xhat);
    for_rows(N, C, [&](int64_t n) {
      double mdxx = 0;
      for (int64_t c = 0; c < C; ++c) mdxx += double(ld(g[n * C + c])) * double(pw[c]) * xhat(n, c);
      mdxx /= double(C);
      const double r = sr.get(n);
      for (int64_t c = 0; c < C; ++c)
        put(dx + n * C + c, r * (double(ld(g[n * C + c])) * double(pw[c]) - xhat(n, c) * mdxx), add);
    });
  });
}

template <typename S>
RowSum<S> row_sum(const Tensor& sum, const Tensor& a, const Tensor& b) {
  return RowSum<S>{sum.ptr<S>(), a.ptr<S>(), b.ptr<S>()};
}

}  // namespace

void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                       const Tensor& in, const Tensor& w, const Tensor& b, float eps) {
  dispatch_act(in.dtype(), "layernorm_forward", [&](auto tag) {
    layernorm_rows(out, mean, rstd, in, w, b, eps, RowSum<decltype(tag)>{});
  });
}

void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db,
                        const Tensor& dout, const Tensor& in, const Tensor& w, const Tensor& mean,
                        const Tensor& rstd) {
  layernorm_grads("layernorm_backward", din, dw, db, dout, in, w, mean, rstd, false);
}

void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in,
                     const Tensor& w, float eps) {
  dispatch_act(in.dtype(), "rmsnorm_forward", [&](auto tag) {
    rmsnorm_rows(out, rstd, in, w, eps, RowSum<decltype(tag)>{});
  });
}

void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout,
                      const Tensor& in, const Tensor& w, const Tensor& rstd) {
  rmsnorm_grads("rmsnorm_backward", din, dw, dout, in, w, rstd, false);
}

void add_layernorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                           const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias, float eps) {
  dispatch_act(a.dtype(), "add_layernorm_forward", [&](auto tag) {
    layernorm_rows(out, mean, rstd, sum, w, bias, eps, row_sum<decltype(tag)>(sum, a, b));
  });
}

void add_rmsnorm_forward(Stream& s, const Tensor& sum, const Tensor& out, const Tensor& rstd, const Tensor& a,
                         const Tensor& b, const Tensor& w, float eps) {
  dispatch_act(a.dtype(), "add_rmsnorm_forward", [&](auto tag) {
    rmsnorm_rows(out, rstd, sum, w, eps, row_sum<decltype(tag)>(sum, a, b));
  });
}

void add_layernorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& db, const Tensor& dout,
                            const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  layernorm_grads("add_layernorm_backward", dsum, dw, db, dout, in, w, mean, rstd, true);
}

void add_rmsnorm_backward(Stream& s, const Tensor& dsum, const Tensor& dw, const Tensor& dout, const Tensor& in,
                          const Tensor& w, const Tensor& rstd) {
  rmsnorm_grads("add_rmsnorm_backward", dsum, dw, dout, in, w, rstd, true);
}

}  // namespace vlm::cpu

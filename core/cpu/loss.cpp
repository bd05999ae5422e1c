// CPU cross-entropy (core/ops/loss.inc): the full-vocabulary loss and the four
// vocab-parallel pieces (rowmax, sumexp + target logit, loss, backward).
// logits[N,V] f32/f64; targets[N] i32; rows whose target == ignore_index give loss 0
// and gradient 0. Per-row vectors (losses, dlosses, rowmax, sumexp, target_logit) are
// f32, or f64 on CPU (gradient checks). Sums run in double in a fixed order; parallel
// over rows (deterministic). dlogits is overwritten.
// f32 logits: exp(x - max) through vec_math.h's 4-lane exp_v4 (relative error < 2e-7),
// exactly 0 below its range (a masked -1e30 logit gives 0, as std::exp would), summed
// in four double lanes added in a fixed order; the target column's gradient is computed
// in double as for f64. f64 logits use std::exp in double throughout.
#include <algorithm>
#include <cmath>

#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

template <typename T>
double row_max(const T* x, int64_t V) {
  double mx = -INFINITY;
  for (int64_t c = 0; c < V; ++c) mx = std::max(mx, double(x[c]));
  return mx;
}

double row_sumexp(const double* x, int64_t V, double mx) {
  double s = 0;
  for (int64_t c = 0; c < V; ++c) s += std::exp(x[c] - mx);
  return s;
}

inline v4f exp_or_zero(v4f x) {
  const v4f e = exp_v4(x);
  return x < -87.33654f ? v4f{} : e;
}

double row_sumexp(const float* x, int64_t V, double mx) {
  const float m = float(mx);  // the row max is one of the row's floats: exact
  double lane[4] = {0, 0, 0, 0};
  for_chunks4(V, [&](int64_t j, int64_t w) {
    const v4f e = exp_or_zero(load4(x + j, w) - m);
    for (int64_t i = 0; i < w; ++i) lane[i] += double(e[i]);
  });
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

// One row of the cross-entropy gradient: dr = (exp(x - mx) * inv - onehot(tc)) * g, where
// tc is the target's column in this row (outside [0, V) when the target is in another
// vocabulary shard). Shared by the full and the vocab-parallel backward.
void ce_grad_row(double* dr, const double* xr, int64_t V, double mx, double inv, int64_t tc, double g) {
  for (int64_t c = 0; c < V; ++c) dr[c] = (std::exp(xr[c] - mx) * inv - (c == tc ? 1.0 : 0.0)) * g;
}

void ce_grad_row(float* dr, const float* xr, int64_t V, double mx, double inv, int64_t tc, double g) {
  const float m = float(mx);
  for_chunks4(V, [&](int64_t j, int64_t w) {
    const v4f e = exp_or_zero(load4(xr + j, w) - m);
    for (int64_t i = 0; i < w; ++i) dr[j + i] = float(double(e[i]) * inv * g);
  });
  if (tc >= 0 && tc < V) dr[tc] = float((std::exp(double(xr[tc]) - mx) * inv - 1.0) * g);
}

// f(n) for every row n in [0, N) of V logits, in parallel when large.
template <typename F>
void for_rows(int64_t N, int64_t V, F&& f) {
  parallel_for(N, row_grain(V, kGrainMath), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) f(n);
  });
}

}  // namespace

void cross_entropy_forward(Stream& s, const Tensor& losses, const Tensor& logits,
                           const Tensor& targets, int ignore_index) {
  const char* op = "cross_entropy_forward";
  const int64_t N = logits.rows(), V = logits.cols();
  const StatRef ls(losses);
  const int32_t* tg = targets.ptr<int32_t>();
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    for_rows(N, V, [&](int64_t n) {
      if (tg[n] == ignore_index) {
        ls.set(n, 0.0);
        return;
      }
      VLM_ASSERT(tg[n] >= 0 && tg[n] < V, op, ": target ", tg[n], " outside [0,", V, ") in row ", n);
      const T* xr = x + n * V;
      const double mx = row_max(xr, V);
      ls.set(n, std::log(row_sumexp(xr, V, mx)) + mx - double(xr[tg[n]]));
    });
  });
}

void cross_entropy_backward(Stream& s, const Tensor& dlogits, const Tensor& logits,
                            const Tensor& targets, const Tensor& dlosses, int ignore_index) {
  const char* op = "cross_entropy_backward";
  const int64_t N = logits.rows(), V = logits.cols();
  const StatRef dl(dlosses);
  const int32_t* tg = targets.ptr<int32_t>();
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    T* dx = dlogits.ptr<T>();
    for_rows(N, V, [&](int64_t n) {
      T* dr = dx + n * V;
      if (tg[n] == ignore_index) {
        std::fill(dr, dr + V, T(0));
        return;
      }
      VLM_ASSERT(tg[n] >= 0 && tg[n] < V, op, ": target ", tg[n], " outside [0,", V, ") in row ", n);
      const T* xr = x + n * V;
      const double mx = row_max(xr, V);
      ce_grad_row(dr, xr, V, mx, 1.0 / row_sumexp(xr, V, mx), int64_t(tg[n]), dl.get(n));
    });
  });
}

void vocab_ce_rowmax(Stream& s, const Tensor& rowmax, const Tensor& logits) {
  const char* op = "vocab_ce_rowmax";
  const int64_t N = logits.rows(), V = logits.cols();
  const StatRef rm(rowmax);
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    for_rows(N, V, [&](int64_t n) { rm.set(n, row_max(x + n * V, V)); });
  });
}

void vocab_ce_sumexp(Stream& s, const Tensor& sumexp, const Tensor& target_logit,
                     const Tensor& logits, const Tensor& rowmax, const Tensor& targets,
                     int64_t vocab_offset) {
  const char* op = "vocab_ce_sumexp";
  const int64_t N = logits.rows(), V = logits.cols();
  const StatRef se(sumexp), tl(target_logit), rm(rowmax);
  const int32_t* tg = targets.ptr<int32_t>();
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    for_rows(N, V, [&](int64_t n) {
      const T* xr = x + n * V;
      se.set(n, row_sumexp(xr, V, rm.get(n)));
      const int64_t c = int64_t(tg[n]) - vocab_offset;
      tl.set(n, c >= 0 && c < V ? double(xr[c]) : 0.0);
    });
  });
}

void vocab_ce_loss(Stream& s, const Tensor& losses, const Tensor& rowmax, const Tensor& sumexp,
                   const Tensor& target_logit, const Tensor& targets, int ignore_index) {
  const int64_t N = targets.numel();
  const StatRef ls(losses), rm(rowmax), se(sumexp), tl(target_logit);
  const int32_t* tg = targets.ptr<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    ls.set(n, tg[n] == ignore_index ? 0.0 : std::log(se.get(n)) + rm.get(n) - tl.get(n));
}

void vocab_ce_backward(Stream& s, const Tensor& dlogits, const Tensor& logits,
                       const Tensor& rowmax, const Tensor& sumexp, const Tensor& targets,
                       const Tensor& dlosses, int64_t vocab_offset, int ignore_index) {
  const char* op = "vocab_ce_backward";
  const int64_t N = logits.rows(), V = logits.cols();
  const StatRef rm(rowmax), se(sumexp), dl(dlosses);
  const int32_t* tg = targets.ptr<int32_t>();
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.ptr<T>();
    T* dx = dlogits.ptr<T>();
    for_rows(N, V, [&](int64_t n) {
      T* dr = dx + n * V;
      if (tg[n] == ignore_index) {
        std::fill(dr, dr + V, T(0));
        return;
      }
      ce_grad_row(dr, x + n * V, V, rm.get(n), 1.0 / se.get(n), int64_t(tg[n]) - vocab_offset, dl.get(n));
    });
  });
}

}  // namespace vlm::cpu

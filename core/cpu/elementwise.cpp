// CPU elementwise helpers (core/ops/elementwise.inc): fill, scale, add, accumulate, mul,
// bias_add, slice_cols, unslice_cols, sum_squares. (convert is in convert.cpp, gelu
// and swiglu in activation.cpp.)
// f32, f64 and bf16 (computed in f32 and rounded once: cpu_util.h, dispatch_act), but
// sum_squares: f32 and f64; all operands of an op share one dtype (bias_add's bias is
// f32 for bf16). Outputs may alias inputs where the declaration allows it (each element
// is read before it is written).
// sum_squares sums in the fixed order of its declaration (core/ops/elementwise.inc), the
// CUDA kernel's, so its result depends neither on the number of threads nor on the
// backend.
// Threads: streaming loops split into one contiguous chunk per thread of at least
// kGrainStream elements (core/cpu/thread_pool.h); the loop bodies are plain indexed
// loops the compiler vectorises.
#include <algorithm>

#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

// f(i) for every i in [0, n): contiguous chunks, in parallel when large.
template <typename F>
void for_each(int64_t n, F&& f) {
  parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// f(r) for every row r in [0, N) of rows of C elements, in parallel when large.
template <typename F>
void for_rows(int64_t N, int64_t C, F&& f) {
  parallel_for(N, row_grain(C, kGrainStream), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r);
  });
}

// The xor butterfly over 32 lanes (o = 16, 8, 4, 2, 1: v[i] += v[i ^ o]) that a warp's
// shuffle reduction computes; every lane ends with the same sum, returned.
double lanes_tree_sum(double (&v)[32]) {
  for (int o = 16; o > 0; o >>= 1) {
    double w[32];
    for (int i = 0; i < 32; ++i) w[i] = v[i] + v[i ^ o];
    std::copy(w, w + 32, v);
  }
  return v[0];
}

}  // namespace

void fill(Stream& s, const Tensor& x, float value) {
  dispatch_act(x.dtype(), "fill", [&](auto tag) {
    using S = decltype(tag);
    S* p = x.ptr<S>();
    const S v = st<S>(value);
    for_each(x.numel(), [&](int64_t i) { p[i] = v; });
  });
}

void scale(Stream& s, const Tensor& x, float alpha) {
  dispatch_act(x.dtype(), "scale", [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    S* p = x.ptr<S>();
    for_each(x.numel(), [&](int64_t i) { p[i] = st<S>(ld(p[i]) * T(alpha)); });
  });
}

void add(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_act(a.dtype(), "add", [&](auto tag) {
    using S = decltype(tag);
    S* o = out.ptr<S>();
    const S *pa = a.ptr<S>(), *pb = b.ptr<S>();
    for_each(a.numel(), [&](int64_t i) { o[i] = st<S>(ld(pa[i]) + ld(pb[i])); });
  });
}

void accumulate(Stream& s, const Tensor& y, const Tensor& x, float alpha) {
  dispatch_act(x.dtype(), "accumulate", [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    S* py = y.ptr<S>();
    const S* px = x.ptr<S>();
    for_each(x.numel(), [&](int64_t i) { py[i] = st<S>(ld(py[i]) + T(alpha) * ld(px[i])); });
  });
}

void mul(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_act(a.dtype(), "mul", [&](auto tag) {
    using S = decltype(tag);
    S* o = out.ptr<S>();
    const S *pa = a.ptr<S>(), *pb = b.ptr<S>();
    for_each(a.numel(), [&](int64_t i) { o[i] = st<S>(ld(pa[i]) * ld(pb[i])); });
  });
}

void bias_add(Stream& s, const Tensor& out, const Tensor& in, const Tensor& bias) {
  const int64_t C = in.cols(), N = in.rows();
  dispatch_act(in.dtype(), "bias_add", [&](auto tag) {
    using S = decltype(tag);
    using T = compute_t<S>;
    S* o = out.ptr<S>();
    const S* pi = in.ptr<S>();
    const T* pb = bias.ptr<T>();
    for_rows(N, C, [&](int64_t n) {
      for (int64_t c = 0; c < C; ++c) o[n * C + c] = st<S>(ld(pi[n * C + c]) + pb[c]);
    });
  });
}

void slice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t N = src.rows(), W = src.cols(), w = dst.cols();
  dispatch_act(src.dtype(), "slice_cols", [&](auto tag) {
    using S = decltype(tag);
    S* d = dst.ptr<S>();
    const S* p = src.ptr<S>();
    for_rows(N, w, [&](int64_t n) { std::copy(p + n * W + offset, p + n * W + offset + w, d + n * w); });
  });
}

void unslice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t N = dst.rows(), W = dst.cols(), w = src.cols();
  dispatch_act(src.dtype(), "unslice_cols", [&](auto tag) {
    using S = decltype(tag);
    S* d = dst.ptr<S>();
    const S* p = src.ptr<S>();
    for_rows(N, w, [&](int64_t n) { std::copy(p + n * w, p + (n + 1) * w, d + n * W + offset); });
  });
}

void sum_squares(Stream& s, const Tensor& out, const Tensor& x) {
  dispatch_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = x.numel(), nchunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
    const T* p = x.ptr<T>();
    // The order of core/ops/elementwise.inc, "sum_squares" (the CUDA kernel's): each
    // chunk in 32 lanes, then the chunk sums in 32 lanes.
    double* part = thread_scratch<double>(0, nchunks);
    parallel_for(nchunks, kGrainStream / kSumSquaresChunk, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double lane[32] = {};
        const int64_t b = ch * kSumSquaresChunk, e = std::min(n, b + kSumSquaresChunk);
        for (int64_t i = b; i < e; ++i) lane[(i - b) % 32] += double(p[i]) * double(p[i]);
        part[ch] = lanes_tree_sum(lane);
      }
    });
    double lane[32] = {};
    for (int64_t ch = 0; ch < nchunks; ++ch) lane[ch % 32] += part[ch];
    out.ptr<T>()[0] += T(lanes_tree_sum(lane));
  });
}

}  // namespace vlm::cpu

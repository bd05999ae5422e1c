// CPU elementwise helpers (core/ops/elementwise.inc): fill, scale, add, accumulate, mul,
// bias_add, slice_cols, unslice_cols, sum_squares. (convert is in convert.cpp, gelu
// and swiglu in activation.cpp.)
// f32 and f64; all operands of an op share one dtype. Outputs may alias inputs where
// the declaration allows it (each element is read before it is written).
// sum_squares reduces in fixed chunks of kChunk elements, then adds the chunk sums in
// order, so its result does not depend on the number of threads.
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

}  // namespace

void fill(Stream& s, const Tensor& x, float value) {
  dispatch_float(x.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    T* p = x.ptr<T>();
    for_each(x.numel(), [&](int64_t i) { p[i] = T(value); });
  });
}

void scale(Stream& s, const Tensor& x, float alpha) {
  dispatch_float(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    T* p = x.ptr<T>();
    for_each(x.numel(), [&](int64_t i) { p[i] *= T(alpha); });
  });
}

void add(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_float(a.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const T *pa = a.ptr<T>(), *pb = b.ptr<T>();
    for_each(a.numel(), [&](int64_t i) { o[i] = pa[i] + pb[i]; });
  });
}

void accumulate(Stream& s, const Tensor& y, const Tensor& x, float alpha) {
  dispatch_float(x.dtype(), "accumulate", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.ptr<T>();
    const T* px = x.ptr<T>();
    for_each(x.numel(), [&](int64_t i) { py[i] += T(alpha) * px[i]; });
  });
}

void mul(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_float(a.dtype(), "mul", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const T *pa = a.ptr<T>(), *pb = b.ptr<T>();
    for_each(a.numel(), [&](int64_t i) { o[i] = pa[i] * pb[i]; });
  });
}

void bias_add(Stream& s, const Tensor& out, const Tensor& in, const Tensor& bias) {
  const int64_t C = in.cols(), N = in.rows();
  dispatch_float(in.dtype(), "bias_add", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const T *pi = in.ptr<T>(), *pb = bias.ptr<T>();
    for_rows(N, C, [&](int64_t n) {
      for (int64_t c = 0; c < C; ++c) o[n * C + c] = pi[n * C + c] + pb[c];
    });
  });
}

void slice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t N = src.rows(), W = src.cols(), w = dst.cols();
  dispatch_float(src.dtype(), "slice_cols", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.ptr<T>();
    const T* p = src.ptr<T>();
    for_rows(N, w, [&](int64_t n) { std::copy(p + n * W + offset, p + n * W + offset + w, d + n * w); });
  });
}

void unslice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) {
  const int64_t N = dst.rows(), W = dst.cols(), w = src.cols();
  dispatch_float(src.dtype(), "unslice_cols", [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.ptr<T>();
    const T* p = src.ptr<T>();
    for_rows(N, w, [&](int64_t n) { std::copy(p + n * w, p + (n + 1) * w, d + n * W + offset); });
  });
}

void sum_squares(Stream& s, const Tensor& out, const Tensor& x) {
  dispatch_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    constexpr int64_t kChunk = 4096;
    const int64_t n = x.numel(), nchunks = (n + kChunk - 1) / kChunk;
    const T* p = x.ptr<T>();
    // Each chunk is summed in double, in order; then the chunk sums are added in order.
    double* part = thread_scratch<double>(0, nchunks);
    parallel_for(nchunks, kGrainStream / kChunk, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double acc = 0;
        const int64_t e = std::min(n, (ch + 1) * kChunk);
        for (int64_t i = ch * kChunk; i < e; ++i) acc += double(p[i]) * double(p[i]);
        part[ch] = acc;
      }
    });
    double total = 0;
    for (int64_t ch = 0; ch < nchunks; ++ch) total += part[ch];
    out.ptr<T>()[0] += T(total);
  });
}

}  // namespace vlm::cpu

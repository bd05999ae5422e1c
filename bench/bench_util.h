// Shared helpers of the benchmarks: deterministic filler tensors, a timer that
// synchronises the stream, and the bf16 tensor-core peak measured with a large GEMM (the
// nominal one by card name is the GPU table's, core/gpu_spec.h). Benchmarks print
// figures; they never assert times.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/options.h"
#include "core/backend.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm::bench {

// The timing options of the op benchmarks (bench_gemm, bench_attention): --iters,
// --warmup, --seconds, per case (a shape, or an attention case and direction).
struct TimingOptions {
  int iters = 0, warmup = 2;
  double seconds = 0.5;
};

inline const OptionSet<TimingOptions>& timing_options() {
  static const OptionSet<TimingOptions> set([](OptionSet<TimingOptions>& s) {
    s.option("iters", &TimingOptions::iters, "timed calls per case; 0 = as many as fit in --seconds").range(0, 1 << 20);
    s.option("warmup", &TimingOptions::warmup, "untimed calls per case before timing").range(0, 1000);
    s.option("seconds", &TimingOptions::seconds, "time budget per case when --iters is 0").range(0.01, 600);
  });
  return set;
}

// A tensor on b of dtype dt with values in [-amp, amp) from a fixed LCG pattern (only
// finite, non-denormal, non-zero values matter for timing: zeros run faster on GPUs).
inline Tensor filled(Backend& b, Shape s, DType dt = DType::F32, float amp = 1.f, uint32_t seed = 12345) {
  std::vector<float> v(size_t(s.numel()));
  uint32_t x = seed;
  for (float& f : v) x = x * 1664525u + 1013904223u, f = amp * (float(x >> 8) / float(1 << 24) * 2.f - 1.f);
  Tensor t = to_backend(b, Tensor::from_vector(v, s));
  if (dt == DType::F32) return t;
  Tensor c = Tensor::empty(b, s, dt);
  convert(b.default_stream(), c, t);
  return c;
}

// Seconds per call of f: `warmup` untimed calls, then `iters` timed calls, or when
// iters == 0 batches of 1, 2, 4, ... calls until `budget_s` has passed (the device is
// synchronised only between batches, so small kernels stay pipelined).
template <typename F>
double time_per_call(Stream& s, F&& f, int warmup, int iters, double budget_s) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) f();
  s.synchronize();
  auto t0 = clock::now();
  auto elapsed = [&] {
    s.synchronize();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  int n = 0;
  if (iters > 0) {
    for (; n < iters; ++n) f();
    return elapsed() / n;
  }
  for (int batch = 1;; batch *= 2) {
    for (int i = 0; i < batch; ++i, ++n) f();
    if (double t = elapsed(); t >= budget_s) return t / n;
  }
}

// Measured bf16 GEMM throughput (TFLOP/s) on b: the best of 5 timed n^3 products x @ w^T.
inline double measure_bf16_peak_tflops(Backend& b, int64_t n = 8192) {
  Stream& s = b.default_stream();
  Tensor a = filled(b, Shape{n, n}, DType::BF16), w = filled(b, Shape{n, n}, DType::BF16, 1.f, 777);
  Tensor c = Tensor::empty(b, Shape{n, n});
  GemmOpts o;
  o.trans_b = true;
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    double t = time_per_call(s, [&] { matmul(s, c, a, w, o); }, 0, 1, 0);
    if (i > 0) best = std::min(best, t);  // the first call warms up
  }
  return 2.0 * double(n) * double(n) * double(n) / best / 1e12;
}

}  // namespace vlm::bench

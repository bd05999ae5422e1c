// GEMM throughput benchmark: prints figures, asserts nothing.
// Shapes are those of the model's linear layers, y[M,N] = x[M,K] @ W[N,K]^T (the
// layout llm/linear_parallel.cpp uses: trans_b), plus large squares. A GEMM counts
// 2*M*N*K floating-point operations. CPU: f32, GFLOP/s. CUDA: f32 and bf16 (bf16 A/B,
// f32 C), TFLOP/s and the fraction of the card's dense bf16 peak, looked up by device
// name; the best large bf16 GEMM is printed as the measured peak.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/device_options.h"
#include "core/ops.h"

using namespace vlm;

namespace {

struct GemmShape {
  int64_t m, n, k;
  const char* what;
};

// Dense bf16 tensor-core peak (TFLOP/s, no sparsity) from the device description; 0 when unknown.
double bf16_peak_tflops(const std::string& desc) {
  if (desc.find("H100") != std::string::npos) return desc.find("PCIe") != std::string::npos ? 756 : 989;
  if (desc.find("H200") != std::string::npos) return 989;
  if (desc.find("A100") != std::string::npos) return 312;
  return 0;
}

// A tensor on backend b of dtype dt with values in [-1, 1) from a fixed pattern (the
// values do not matter for timing; they only have to be finite and not denormal).
Tensor filled(Backend& b, Shape s, DType dt) {
  std::vector<float> v(size_t(s.numel()));
  uint32_t x = 12345;
  for (float& f : v) x = x * 1664525u + 1013904223u, f = float(x >> 8) / float(1 << 24) * 2.f - 1.f;
  Tensor t = to_backend(b, Tensor::from_vector(v, s));
  if (dt == DType::F32) return t;
  Tensor c = Tensor::empty(b, s, dt);
  convert(b.default_stream(), c, t);
  return c;
}

// Seconds per call of f: `warmup` untimed calls, then `iters` timed calls, or when
// iters == 0 batches of 1, 2, 4, ... calls until `budget_s` has passed (the device is
// synchronised only between batches, so small GEMMs stay pipelined).
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

}  // namespace

int main(int argc, char** argv) {
  Config cfg("bench_gemm", "");
  register_device_options(cfg);
  cfg.add_int("iters", 0, "timed calls per shape; 0 = as many as fit in --seconds", 0, 1 << 20);
  cfg.add_int("warmup", 2, "untimed calls per shape before timing", 0, 1000);
  cfg.add_float("seconds", 0.5, "time budget per shape when --iters is 0", 0.01, 600);
  try {
    if (!cfg.parse(argc, argv)) return 0;
    Backend& b = backend_from_config(cfg);
    Stream& s = b.default_stream();
    const bool gpu = b.device() == DeviceKind::CUDA;
    const int warmup = int(cfg.get_int("warmup")), iters = int(cfg.get_int("iters"));
    const double budget = cfg.get_float("seconds");

    std::vector<GemmShape> shapes = {{512, 768, 768, "attn out proj (T=512, C=768)"},
                                     {512, 2304, 768, "qkv (T=512, C=768)"},
                                     {512, 3072, 768, "mlp up (T=512, 4C)"},
                                     {512, 768, 3072, "mlp down (T=512, 4C)"},
                                     {2048, 2048, 2048, "square 2048"}};
    if (gpu) {
      shapes.push_back({8192, 3072, 768, "mlp up (T=8192)"});
      shapes.push_back({8192, 32000, 768, "lm head (T=8192, V=32000)"});
      shapes.push_back({4096, 4096, 4096, "square 4096"});
      shapes.push_back({8192, 8192, 8192, "square 8192"});
    }
    std::vector<DType> dtypes = {DType::F32};
    if (gpu) dtypes.push_back(DType::BF16);
    const double peak = gpu ? bf16_peak_tflops(b.description()) : 0;

    std::printf("bench_gemm on %s\n", b.description().c_str());
    std::printf("y[M,N] = x[M,K] @ W[N,K]^T, 2*M*N*K flop per call; %s\n",
                iters ? ("--iters " + std::to_string(iters)).c_str() : "timed for --seconds per shape");
    if (gpu) std::printf("bf16 dense peak of this card: %s\n", peak ? (std::to_string(int(peak)) + " TFLOP/s").c_str() : "unknown (not an A100/H100/H200)");
    std::printf("%-6s %6s %6s %6s  %10s  %12s%s  %s\n", "dtype", "M", "N", "K", "ms/call", gpu ? "TFLOP/s" : "GFLOP/s",
                gpu ? "  of peak" : "", "shape");
    double best_bf16 = 0;
    for (DType dt : dtypes) {
      for (const GemmShape& g : shapes) {
        Tensor x = filled(b, Shape{g.m, g.k}, dt), w = filled(b, Shape{g.n, g.k}, dt);
        Tensor y = Tensor::zeros(b, Shape{g.m, g.n}, DType::F32);
        GemmOpts o;
        o.trans_b = true;
        double sec = time_per_call(s, [&] { matmul(s, y, x, w, o); }, warmup, iters, budget);
        double flops = 2.0 * double(g.m) * double(g.n) * double(g.k) / sec;
        double shown = gpu ? flops / 1e12 : flops / 1e9;
        char frac[32] = "";
        if (gpu && peak > 0 && dt == DType::BF16) std::snprintf(frac, sizeof frac, "  %7.1f%%", 100 * flops / 1e12 / peak);
        else if (gpu) std::snprintf(frac, sizeof frac, "  %8s", "-");
        std::printf("%-6s %6lld %6lld %6lld  %10.3f  %12.2f%s  %s\n", std::string(dtype_name(dt)).c_str(),
                    (long long)g.m, (long long)g.n, (long long)g.k, sec * 1e3, shown, frac, g.what);
        if (dt == DType::BF16 && g.m * g.n * g.k >= int64_t(4096) * 4096 * 4096)
          best_bf16 = std::max(best_bf16, flops / 1e12);
      }
    }
    if (gpu)
      std::printf("measured bf16 peak (best large GEMM): %.1f TFLOP/s%s\n", best_bf16,
                  peak ? (" = " + std::to_string(int(100 * best_bf16 / peak + 0.5)) + "% of the card's peak").c_str() : "");
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_gemm: error: %s\n", e.what());
    return 2;
  }
}

// GEMM throughput benchmark: prints figures, asserts nothing.
// Shapes are those of the model's linear layers, y[M,N] = x[M,K] @ W[N,K]^T (the
// layout llm/linear_parallel.cpp uses: trans_b), plus large squares. A GEMM counts
// 2*M*N*K floating-point operations, f32 and bf16 (bf16 A/B, f32 C: on a CPU with
// AVX512_BF16 its bf16 units, elsewhere an f32 GEMM of the bf16 values). CPU: GFLOP/s.
// CUDA: TFLOP/s and the fraction of the card's dense bf16 peak (the GPU table,
// core/gpu_spec.h); the best large bf16 GEMM is printed as the measured peak.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/options.h"
#include "bench/bench_util.h"
#include "core/device_options.h"
#include "core/gpu_spec.h"
#include "core/ops.h"

using namespace vlm;

namespace {

struct GemmCase {
  int64_t m, n, k;
  const char* what;
};

}  // namespace

int main(int argc, char** argv) {
  Config cfg("bench_gemm", "");
  register_device_options(cfg);
  bench::timing_options().add_to(cfg);
  try {
    if (!cfg.parse(argc, argv)) return 0;
    Backend& b = backend_from_config(cfg);
    Stream& s = b.default_stream();
    const bool gpu = b.device() == DeviceKind::CUDA;
    const bench::TimingOptions args = bench::timing_options().read(cfg);
    const int warmup = args.warmup, iters = args.iters;
    const double budget = args.seconds;

    std::vector<GemmCase> shapes = {{512, 768, 768, "attn out proj (T=512, C=768)"},
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
    const std::vector<DType> dtypes = {DType::F32, DType::BF16};
    const GpuSpec* spec = gpu ? gpu_spec_of_device(b.description()) : nullptr;
    const double peak = spec ? spec->bf16_tflops : 0;

    std::printf("bench_gemm on %s\n", b.description().c_str());
    std::printf("y[M,N] = x[M,K] @ W[N,K]^T, 2*M*N*K flop per call; %s\n",
                iters ? ("--iters " + std::to_string(iters)).c_str() : "timed for --seconds per shape");
    if (gpu) std::printf("bf16 dense peak of this card: %s\n", peak ? (std::to_string(int(peak)) + " TFLOP/s").c_str() : "unknown (not an A100/H100/H200 SXM: core/gpu_spec.h)");
    std::printf("%-6s %6s %6s %6s  %10s  %12s%s  %s\n", "dtype", "M", "N", "K", "ms/call", gpu ? "TFLOP/s" : "GFLOP/s",
                gpu ? "  of peak" : "", "shape");
    double best_bf16 = 0;
    for (DType dt : dtypes) {
      for (const GemmCase& g : shapes) {
        Tensor x = bench::filled(b, Shape{g.m, g.k}, dt), w = bench::filled(b, Shape{g.n, g.k}, dt);
        Tensor y = Tensor::zeros(b, Shape{g.m, g.n}, DType::F32);
        GemmOpts o;
        o.trans_b = true;
        double sec = bench::time_per_call(s, [&] { matmul(s, y, x, w, o); }, warmup, iters, budget);
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

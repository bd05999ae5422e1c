// Attention throughput benchmark: packed variable-length attention (cu_seqlens),
// forward and backward, at a few sizes; prints figures, asserts nothing.
// FLOP count (the FlashAttention convention), per sample i of length T_i:
//   forward  = 4 * T_i^2 * HS * NH   (S = Q K^T and O = P V, 2*T^2*HS each per head)
//   backward = 2.5 * forward         (dV, dP, dQ, dK and the recomputed S: 5 GEMMs)
// and both are halved for causal attention (half of the score matrix is masked).
// Grouped-query attention (NKV < NH) does the same arithmetic as NKV = NH.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "base/options.h"
#include "bench/bench_util.h"
#include "core/device_options.h"
#include "core/ops.h"

using namespace vlm;

namespace {

struct AttnCase {
  std::vector<int> lens;  // sample lengths packed into T
  int nh, nkv, hs;
  bool causal;
};

// "4x512" or "128+384+1000": the sample lengths, run-length encoded.
std::string lens_str(const std::vector<int>& lens) {
  std::ostringstream os;
  for (size_t i = 0, j; i < lens.size(); i = j) {
    for (j = i; j < lens.size() && lens[j] == lens[i];) ++j;
    os << (i ? "+" : "");
    if (j - i > 1) os << j - i << "x";
    os << lens[i];
  }
  return os.str();
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg("bench_attention", "");
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

    std::vector<AttnCase> cases;
    if (gpu)
      cases = {{{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, 12, 12, 64, true},
               {{2048, 2048, 2048, 2048}, 16, 16, 128, true},
               {{4096, 4096}, 32, 8, 128, true},
               {{300, 1700, 4096, 900, 1200}, 16, 4, 128, true},
               {{577, 577, 577, 577, 577, 577, 577, 577}, 16, 16, 64, false}};  // ViT-like
    else
      cases = {{{256, 256}, 12, 12, 64, true},
               {{64, 192, 500}, 12, 4, 64, true},
               {{197, 197}, 12, 12, 64, false}};  // ViT-B/16 at 224: bidirectional

    std::printf("bench_attention on %s (f32)\n", b.description().c_str());
    std::printf("flop: fwd 4*T_i^2*HS*NH per sample, bwd 2.5x fwd, both /2 when causal\n");
    std::printf("%-28s %4s %4s %4s %6s  %9s %9s  %9s %9s  %9s\n", "samples (T_i)", "NH", "NKV", "HS", "mask",
                "fwd ms", "GFLOP/s", "bwd ms", "GFLOP/s", "fwd+bwd");
    for (const AttnCase& c : cases) {
      const int64_t T = std::accumulate(c.lens.begin(), c.lens.end(), int64_t(0));
      std::vector<int32_t> cu{0};
      double fwd_flop = 0;
      for (int l : c.lens) {
        cu.push_back(cu.back() + l);
        fwd_flop += 4.0 * double(l) * l * c.hs * c.nh * (c.causal ? 0.5 : 1.0);
      }
      const int max_len = *std::max_element(c.lens.begin(), c.lens.end());
      Tensor q = bench::filled(b, Shape{T, c.nh, c.hs}, DType::F32, 1.f), k = bench::filled(b, Shape{T, c.nkv, c.hs}, DType::F32, 1.f);
      Tensor v = bench::filled(b, Shape{T, c.nkv, c.hs}, DType::F32, 1.f), dout = bench::filled(b, Shape{T, c.nh, c.hs}, DType::F32, 0.1f);
      Tensor out = Tensor::zeros(b, Shape{T, c.nh, c.hs}), lse = Tensor::zeros(b, Shape{T, c.nh});
      Tensor dq = Tensor::zeros(b, q.shape()), dk = Tensor::zeros(b, k.shape()), dv = Tensor::zeros(b, v.shape());
      Tensor cu_t = to_backend(b, Tensor::from_vector(cu, Shape{int64_t(cu.size())}));
      double tf = bench::time_per_call(
          s, [&] { attention_forward(s, out, lse, q, k, v, cu_t, max_len, c.causal); }, warmup, iters, budget);
      double tb = bench::time_per_call(
          s, [&] { attention_backward(s, dq, dk, dv, dout, q, k, v, out, lse, cu_t, max_len, c.causal); }, warmup,
          iters, budget);
      std::printf("%-28s %4d %4d %4d %6s  %9.3f %9.1f  %9.3f %9.1f  %9.1f\n", lens_str(c.lens).c_str(), c.nh, c.nkv,
                  c.hs, c.causal ? "causal" : "full", tf * 1e3, fwd_flop / tf / 1e9, tb * 1e3,
                  2.5 * fwd_flop / tb / 1e9, 3.5 * fwd_flop / (tf + tb) / 1e9);
    }
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_attention: error: %s\n", e.what());
    return 2;
  }
}

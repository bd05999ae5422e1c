// Benchmark of the vision encoder (vision/encoder.h): forward and backward time and
// GFLOP/s (TFLOP/s on a GPU) at SigLIP-B/16 shapes by default (the vision.* defaults:
// S=224, P=16 -> 196 tokens per image, d=768, L=12, 12 heads, d_ff=3072) for --batch
// images (default 8), texture map on. Prints figures, asserts nothing.
// One iteration = forward (features kept) then backward from a fixed dfeatures (all
// parameter gradients); the median of --iters timed iterations after --warmup.
// FLOPs = 2 x the multiply-adds of VisionEncoder::{forward,backward}_macs_per_image
// (matmuls and attention products; norms, softmax and GELU not counted).
// Matmul inputs: f32 on both backends. bf16 inputs (cuBLASLt takes them, core/ops/gemm.inc)
// are not available to the encoder: nn/'s layers keep f32 parameters and activations
// only, so the bf16 line says so instead of printing a figure.
//   bench_vision [--device auto|cpu|cuda] [--batch 8] [--iters 3] [--warmup 1]
//                [--vision.layers 12 ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "bench/bench_util.h"
#include "core/device_options.h"
#include "parallel/groups.h"
#include "parallel/mpi/mpi_session.h"
#include "vision/encoder.h"
#include "vision/siglip_config.h"

using namespace vlm;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct BenchOptions {
  int64_t batch = 8;
  int iters = 3, warmup = 1;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("batch", &BenchOptions::batch, "images per micro-batch").range(1, 1 << 16);
    s.option("iters", &BenchOptions::iters, "timed iterations (forward + backward)").range(1, 1 << 20);
    s.option("warmup", &BenchOptions::warmup, "untimed iterations first").range(0, 1 << 20);
  });
  return set;
}

void run(const Config& cfg, Backend& b) {
  const VisionConfig v = resolve_vision_config(cfg);  // vision.hf: the checkpoint's shape (weights not read)
  const BenchOptions o = bench_options().read(cfg);
  const int64_t B = o.batch, S = v.image_size, G = v.grid();
  const int warmup = o.warmup, iters = o.iters;
  auto self = make_communicator(b.device(), MPI_COMM_SELF, "vision", 600.0);
  VisionEncoder enc(v, b, *self, B);
  enc.init(read_device_options(cfg).seed);
  // Pixels from a fixed pattern; texture and dfeatures filled (bench_util.h).
  std::vector<uint8_t> px(size_t(B * S * S * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t((i * 2654435761u) >> 24);
  Tensor host_px = Tensor::empty(cpu_backend(), Shape{B, S, S, 3}, DType::U8);
  std::copy(px.begin(), px.end(), host_px.ptr<uint8_t>());
  const Tensor pixels = to_backend(b, host_px);
  const Tensor texture = bench::filled(b, Shape{B, kTextureChannels, G, G});
  const Tensor dfeat = bench::filled(b, Shape{B * v.tokens(), v.d_model}, DType::F32, 1e-3f, 99);
  Stream& s = b.default_stream();

  std::vector<double> tf, tb;
  for (int it = 0; it < warmup + iters; ++it) {
    auto t0 = clock_type::now();
    enc.forward(s, pixels, texture);
    s.synchronize();
    const double f = seconds_since(t0);
    t0 = clock_type::now();
    enc.zero_grads();
    enc.backward(s, dfeat, texture);
    s.synchronize();
    if (it >= warmup) tf.push_back(f), tb.push_back(seconds_since(t0));
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tb.begin(), tb.end());
  const double f = tf[tf.size() / 2], bw = tb[tb.size() / 2];
  const double ff = 2.0 * enc.forward_macs_per_image() * double(B), fb = 2.0 * enc.backward_macs_per_image() * double(B);
  const bool cpu = b.device() == DeviceKind::CPU;
  const double unit = cpu ? 1e9 : 1e12;
  const char* u = cpu ? "GFLOP/s" : "TFLOP/s";
  std::printf("device: %s\n", b.description().c_str());
  std::printf("encoder: %s, batch %lld (%lld tokens), params %.1fM, activations %.2f GiB\n", v.str().c_str(),
              (long long)B, (long long)(B * v.tokens()), double(enc.params().param_bytes()) / 4e6,
              double(enc.activation_bytes()) / double(1ull << 30));
  std::printf("f32 matmul inputs (median of %d after %d warm-up):\n", iters, warmup);
  std::printf("  forward   %8.3f s  %7.1f GFLOP  %8.2f %s  %8.1f images/s\n", f, ff / 1e9, ff / f / unit, u,
              double(B) / f);
  std::printf("  backward  %8.3f s  %7.1f GFLOP  %8.2f %s\n", bw, fb / 1e9, fb / bw / unit, u);
  std::printf("  fwd+bwd   %8.3f s  %7.1f GFLOP  %8.2f %s  %8.1f images/s\n", f + bw, (ff + fb) / 1e9,
              (ff + fb) / (f + bw) / unit, u, double(B) / (f + bw));
  std::printf("bf16 matmul inputs: not measured: the encoder's layers (nn/) hold f32 parameters and "
              "activations only%s\n", cpu ? " (and the CPU matmul is f32/f64)" : "");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  Config cfg("bench_vision",
             "[--device auto|cpu|cuda] [--batch 8] [--iters 3] [--warmup 1] [--vision.* ...]\n"
             "Vision encoder forward and backward time and GFLOP/s (TFLOP/s on a GPU), SigLIP-B/16 shapes by "
             "default.");
  register_device_options(cfg);
  register_vision_options(cfg);
  bench_options().add_to(cfg);
  try {
    if (!cfg.parse(argc, argv)) return 0;
    run(cfg, backend_from_config(cfg));
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_vision: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

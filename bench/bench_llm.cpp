// Training-step benchmark of the language backbone at TP=1: prints figures, asserts
// nothing. Models: `gpt2` (GPT-2 124M shape: V=50257, C=768, L=12, NH=12, F=3072),
// `llama1b` (TinyLlama-1.1B shape: V=32000, C=2048, L=22, NH=32, NKV=4, F=5632) and
// `tiny` (a Llama of V=512, C=128, L=2, NH=4, NKV=2, F=256: for rehearsals of the
// command lines, bench/gpu/proof.sh rehearse).
// --precision fp32 (exact f32 matmuls) or bf16 (train.precision=bf16: bf16 working
// copies of the f32 master weights, bf16 matmuls with f32 accumulation; the copies are
// re-rounded after each AdamW step, inside the timed step; docs/training.md, "Numerics").
// One step = zeroing the gradients + forward (with loss) + backward + finalize_grads +
// AdamW on every parameter (core adamw_step with f32 moments); the median times of the
// zeroing (4 bytes written per parameter: PyTorch's zero_grad(set_to_none=True) writes
// none) and of AdamW are printed too. AdamW needs 16 bytes per parameter (value, grad,
// m, v); with --optimizer auto it is skipped (forward + backward only, said in the
// output) when that would not fit in half the available memory (CPU) or free device
// memory is not checked (CUDA: always on).
// tokens/s = batch * seq / step time (median of --iters timed steps after --warmup).
// FLOPs per token (PaLM appendix B): 6 N + 12 L C T, N = parameters used in matmuls
// (embedding lookups excluded, output layer included). On CUDA, MFU = achieved FLOP/s
// over the device's dense bf16 peak: --peak_tflops, else the GPU table's
// (core/gpu_spec.h: 989 on an H100/H200 SXM), else measured here with 8192^3 bf16 GEMMs.
// bench/gpu/torch_baseline.py prints PyTorch's figures for the same shapes in this format.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "bench/bench_util.h"
#include "core/device_options.h"
#include "core/gpu_spec.h"
#include "core/ops.h"
#include "llm/backbone.h"
#include "llm/param_specs.h"
#include "parallel/groups.h"
#include "parallel/mpi/mpi_session.h"
#include "plan/plan_llm.h"

using namespace vlm;

namespace {

using clock_type = std::chrono::steady_clock;

ModelConfig model_shape(const std::string& name) {
  ModelConfig m;
  if (name == "gpt2") {
    m.family = ModelFamily::GPT2;
    m.vocab_size = 50257, m.d_model = 768, m.n_layers = 12, m.n_heads = 12, m.d_ff = 3072, m.max_pos = 1024;
    m.tied_embeddings = true;
  } else if (name == "llama1b") {
    m.family = ModelFamily::Llama;
    m.vocab_size = 32000, m.d_model = 2048, m.n_layers = 22, m.n_heads = 32, m.n_kv_heads = 4, m.d_ff = 5632;
    m.max_pos = 2048, m.tied_embeddings = false;
  } else if (name == "tiny") {
    m.family = ModelFamily::Llama;
    m.vocab_size = 512, m.d_model = 128, m.n_layers = 2, m.n_heads = 4, m.n_kv_heads = 2, m.d_ff = 256;
    m.max_pos = 2048, m.tied_embeddings = false;
  } else {
    throw UserError(cat("--models: unknown model '", name, "' (expected gpt2, llama1b or tiny)"));
  }
  return m;
}

// Parameters used in matmuls: every 2-D weight but the embedding tables, plus the
// output layer (the tied token table, or lm_head.weight, counted among 2-D weights).
double matmul_params(const ParamTable& t, const ModelConfig& m) {
  double n = 0;
  for (const Param& p : t.params()) {
    if (p.spec.hf.ndim() != 2) continue;
    if (p.spec.name == "model.embed_positions.weight") continue;
    if (p.spec.name == kEmbedTokens && !m.tied_embeddings) continue;
    n += double(p.spec.hf.numel());
  }
  return n;
}

double available_host_bytes() {
  return double(sysconf(_SC_AVPHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
}

struct BenchOptions {
  std::string models = "gpt2,llama1b";
  int64_t batch = 1, seq = 128;
  int iters = 2, warmup = 1, layers = 0;
  std::string optimizer = "auto";
  Precision precision = Precision::FP32;
  double peak_tflops = 0;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("models", &BenchOptions::models, "comma-separated models: gpt2 (124M), llama1b (1.1B), tiny (0.4M)");
    s.option("batch", &BenchOptions::batch, "samples per step").range(1, 1 << 16);
    s.option("precision", &BenchOptions::precision,
             "fp32, or bf16 mixed precision (train.precision=bf16: bf16 weight copies and activations; on a CPU "
             "with AVX512_BF16 the matmuls run on its bf16 units)")
        .choices({{"fp32", Precision::FP32}, {"bf16", Precision::BF16}});
    s.option("seq", &BenchOptions::seq, "tokens per sample").range(2, 1 << 20);
    s.option("iters", &BenchOptions::iters, "timed steps").range(1, 1 << 20);
    s.option("warmup", &BenchOptions::warmup, "untimed steps first").range(0, 1 << 20);
    s.option("layers", &BenchOptions::layers,
             "decoder layers instead of the model's (0 = the model's): a short step for a kernel profiler")
        .range(0, 1 << 10);
    s.option("optimizer", &BenchOptions::optimizer, "AdamW in the step: auto = when its memory fits (always on CUDA)")
        .one_of({"auto", "adamw", "none"});
    s.option("peak_tflops", &BenchOptions::peak_tflops,
             "dense bf16 peak for MFU (CUDA); 0 = the GPU table's (core/gpu_spec.h), else measured with a bf16 GEMM")
        .range(0.0, 1e6);
  });
  return set;
}

void run_model(const std::string& name, Backend& b, Communicator& tp, const BenchOptions& args, uint64_t seed,
               double peak_tflops) {
  ModelConfig m = model_shape(name);
  if (args.layers > 0) m.n_layers = args.layers;
  const std::string label = args.layers > 0 ? cat(name, "/L", m.n_layers) : name;  // the printed name
  const int64_t B = args.batch, T1 = args.seq, T = B * T1;
  m.max_pos = std::max<int64_t>(m.max_pos, T1);
  const int warmup = args.warmup, iters = args.iters;
  const Precision prec = args.precision;
  Backbone bb(m, b, tp, T, true, prec);
  bb.init(seed);
  Stream& s = b.default_stream();
  bb.params().refresh_working(s);  // the bf16 copies of the initial weights (no-op at fp32)
  const double n_params = double(bb.param_bytes()) / 4.0;

  const std::string& opt = args.optimizer;
  bool adamw = opt == "adamw";
  if (opt == "auto")
    adamw = b.device() != DeviceKind::CPU || 2.0 * 4.0 * n_params < 0.5 * available_host_bytes();
  std::vector<Tensor> mom, var;
  if (adamw)
    for (const Param& p : bb.params().params()) {
      mom.push_back(Tensor::zeros(b, p.local));
      var.push_back(Tensor::zeros(b, p.local));
    }

  // B samples of T1 tokens; random ids, next-token targets (last of each sample ignored).
  std::vector<int32_t> cu{0}, ids(static_cast<size_t>(T)), targets(static_cast<size_t>(T));
  uint64_t x = 88172645463325252ull;
  for (auto& id : ids) x ^= x << 13, x ^= x >> 7, x ^= x << 17, id = int32_t(x % uint64_t(m.vocab_size));
  for (int64_t i = 0; i < B; ++i) {
    cu.push_back(int32_t((i + 1) * T1));
    for (int64_t t = 0; t < T1; ++t)
      targets[size_t(i * T1 + t)] = t + 1 < T1 ? ids[size_t(i * T1 + t + 1)] : kIgnoreIndex;
  }
  LmInput in = make_lm_input(b, cu, ids, targets);

  std::vector<double> times, adam_times, zero_times;
  float loss = 0.f;
  for (int it = 0; it < warmup + iters; ++it) {
    auto t0 = clock_type::now();
    bb.zero_grads();
    s.synchronize();
    if (it >= warmup) zero_times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    loss = bb.forward(s, in, true);
    bb.backward(s, in);
    bb.finalize_grads(s);
    if (adamw) {
      s.synchronize();
      const auto a0 = clock_type::now();
      AdamWOpts o;
      o.lr = 1e-4f;
      o.step = it + 1;
      const auto& ps = bb.params().params();
      for (size_t i = 0; i < ps.size(); ++i)  // and the next step's bf16 weights, in the same pass
        adamw_step(s, ps[i].value, ps[i].grad, mom[i], var[i], ps[i].work, o);
      s.synchronize();
      if (it >= warmup) adam_times.push_back(std::chrono::duration<double>(clock_type::now() - a0).count());
    }
    s.synchronize();
    if (it >= warmup) times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double t = times[times.size() / 2];
  const double flops_per_token = 6.0 * matmul_params(bb.params(), m) + 12.0 * m.n_layers * double(m.d_model) * double(T1);
  const double achieved = flops_per_token * double(T) / t;
  std::printf("%-8s params %.1fM  B=%lld T=%lld  %s  step %s  %.3f s (median of %d)  %.0f tokens/s  %.1f %s  loss %.3f",
              label.c_str(), n_params / 1e6, (long long)B, (long long)T1, args.precision == Precision::BF16 ? "bf16" : "fp32",
              adamw ? "fwd+bwd+AdamW" : "fwd+bwd (no AdamW: memory)", t, iters, double(T) / t,
              b.device() == DeviceKind::CPU ? achieved / 1e9 : achieved / 1e12,
              b.device() == DeviceKind::CPU ? "GFLOP/s" : "TFLOP/s", double(loss));
  if (peak_tflops > 0) std::printf("  MFU %.1f%% of %.0f TFLOP/s bf16", 100.0 * achieved / 1e12 / peak_tflops, peak_tflops);
  if (adamw) {
    std::sort(adam_times.begin(), adam_times.end());
    std::printf("  AdamW %.3f s", adam_times[adam_times.size() / 2]);
  }
  std::sort(zero_times.begin(), zero_times.end());
  std::printf("  zero grads %.4f s\n", zero_times[zero_times.size() / 2]);
  // The planner's prediction for this shape on this GPU (plan/plan_llm.h), and the
  // measured MFU on the planner's model FLOPs, so the two compare directly.
  if (const GpuSpec* g = b.device() == DeviceKind::CUDA ? gpu_spec_of_device(b.description()) : nullptr) {
    const LlmStepPrediction p = predict_llm_step(m, B, T1, *g, args.precision == Precision::BF16);
    std::printf("%-8s plan (vlm plan --plan.llm_seq %lld, %s, %s): step %.3f s, MFU %.1f%%; measured: step %.3f s, "
                "MFU %.1f%% on the same model FLOPs and peak\n",
                label.c_str(), (long long)T1, g->name, args.precision == Precision::BF16 ? "bf16" : "fp32", p.total_s(),
                100 * p.mfu, t, 100 * p.model_flops / (p.peak_flops * t));
  }
  // Which route each attention shape took (cuDNN's fused attention, or our kernels and why).
  for (const std::string& line : attention_paths(s)) std::printf("%-8s attention: %s\n", label.c_str(), line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  Config cfg("bench_llm", "");
  register_device_options(cfg);
  bench_options().add_to(cfg);
  try {
    if (!cfg.parse(argc, argv)) return 0;
    Backend& b = backend_from_config(cfg);
    auto tp = make_communicator(b.device(), MPI_COMM_SELF, "tp", 600.0);
    const BenchOptions args = bench_options().read(cfg);
    double peak = args.peak_tflops;
    if (b.device() != DeviceKind::CPU && peak == 0.0) {
      if (const GpuSpec* g = gpu_spec_of_device(b.description())) {
        peak = g->bf16_tflops;
        std::printf("dense bf16 peak of the %s (core/gpu_spec.h): %.0f TFLOP/s\n", g->name, peak);
      } else {
        peak = bench::measure_bf16_peak_tflops(b);
        std::printf("measured bf16 GEMM peak (8192^3; a GPU the table does not know): %.0f TFLOP/s\n", peak);
      }
    }
    std::stringstream ss(args.models);
    for (std::string name; std::getline(ss, name, ',');)
      run_model(name, b, *tp, args, read_device_options(cfg).seed, peak);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_llm: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

// The VLM training step (train/step.h) on synthetic micro-batches, in serial and in
// overlap mode: per mode the mean wall time of a step (forward, backward and the DP
// reduction, and at --zero 3 the layers' gathers; no optimizer), the mean overlap
// fraction and exposed communication of the
// scheduler's step summary (scheduler/trace.h), the busy time per stream; then the
// serial / overlap ratio. Task times come from the graph's events: host times on the
// CPU, CUDA events on a GPU (--device cuda), so there the busy time per stream is the
// device's. --trace FILE writes the timed steps of both modes (serial first) as a Chrome
// trace. Then the backbone alone: its forward and backward over the same packed rows as
// the overlap step's last run (each micro-batch's visual tokens shared evenly among its
// images, with their prompts and captions; no encoder, scorers or DP reduction), and the
// VLM step's time over it: what the front end and the DP reduction add.
// --precision bf16 runs the step at train.precision=bf16. Runs on one rank or
// under mpirun (TP = --tp, DP = the rest; bench/bench_step.sh runs 1 rank, TP = 2 and
// DP = 2; each rank on its GPU as in `vlm train`). Rank 0 prints; figures only.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "core/ops.h"
#include "llm/lm_input.h"
#include "optim/dp_grads.h"
#include "parallel/runtime.h"
#include "scheduler/trace.h"
#include "train/step.h"

using namespace vlm;

namespace {

struct BenchOptions {
  int tp = 1, micro_batches = 4;
  int64_t images = 8, width = 128;
  int steps = 10, warmup = 2, zero = 0, vision_layers = 2, llm_layers = 2;
  std::string device = "cpu";
  Precision precision = Precision::FP32;
  std::string trace;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("tp", &BenchOptions::tp, "tensor-parallel ranks (the world size divided by it is DP)").range(1, 64);
    s.option("micro_batches", &BenchOptions::micro_batches,
             "micro-batches per step (>= 2: pipelined on two front-end slots)")
        .range(1, 64);
    s.option("images", &BenchOptions::images, "images per micro-batch and rank").range(1, 256);
    s.option("width", &BenchOptions::width, "d_model of the encoder and the backbone (4 heads; above 1024, one per 256)").range(16, 4096);
    s.option("vision_layers", &BenchOptions::vision_layers, "layers of the encoder").range(1, 256);
    s.option("llm_layers", &BenchOptions::llm_layers,
             "layers of the backbone (a VLM's backbone does most of the FLOPs: 16 with 2 encoder layers makes the "
             "encoder about a tenth)")
        .range(1, 256);
    s.option("steps", &BenchOptions::steps, "timed steps per mode").range(1, 100000);
    s.option("warmup", &BenchOptions::warmup, "untimed steps per mode").range(0, 1000);
    s.option("zero", &BenchOptions::zero, "the ZeRO level over DP (train.zero, docs/training.md)").range(0, 3);
    s.option("device", &BenchOptions::device, "backend of the step (cuda: each rank on its GPU)")
        .one_of({"auto", "cpu", "cuda"});
    s.option("precision", &BenchOptions::precision, "train.precision of the model")
        .choices({{"fp32", Precision::FP32}, {"bf16", Precision::BF16}});
    s.option("trace", &BenchOptions::trace, "write the timed steps of both modes as a Chrome trace to this file (rank 0)");
  });
  return set;
}

// A small VLM: a ViT over 32x32 images (8 x 8 cells; 2 layers by default), the three
// scorers, 16..32 visual tokens per image, a Llama backbone (2 layers by default).
VlmConfig bench_config(const BenchOptions& o) {
  VlmConfig c;
  const int64_t d = o.width;
  // 4 heads, or one per 256 channels above width 1024: the CUDA attention takes head sizes up to 256.
  const int64_t heads = std::max<int64_t>(4, d / 256);
  VLM_REQUIRE(d % heads == 0 && d / heads <= 256, "--width ", d, ": expected a width that ", heads,
              " heads divide into head sizes of at most 256 (a multiple of 4 up to 1024, of 256 above)");
  c.vision.image_size = 32, c.vision.patch = 4, c.vision.d_model = d, c.vision.n_layers = o.vision_layers;
  c.vision.n_heads = heads, c.vision.d_ff = 2 * d;
  c.scorers.lod.region = 2, c.scorers.lod.min_tokens = 16, c.scorers.lod.max_tokens = 32;
  c.scorers.lod.fixed_budget = 0;
  c.scorers.scorers.hidden = 64;
  c.llm.family = ModelFamily::Llama, c.llm.vocab_size = 512, c.llm.d_model = d, c.llm.n_layers = o.llm_layers;
  c.llm.n_heads = heads, c.llm.n_kv_heads = heads, c.llm.d_ff = 2 * d, c.llm.tied_embeddings = false;
  c.max_images = o.images, c.max_text = 24;
  c.front_slots = o.micro_batches >= 2 ? 2 : 1;  // as resolve_vlm_config
  c.precision = o.precision;
  return c;
}

// This rank's micro-batches: random pixels and texture, prompts of 4 and captions of 16 tokens.
struct Data {
  std::vector<uint8_t> pixels;
  std::vector<float> texture;
  std::vector<MicroBatch> mbs;
};

Data make_data(const VlmConfig& c, int M, int dp, int rank) {
  Data d;
  const int64_t B = c.max_images, S = c.vision.image_size, G = c.vision.grid();
  uint32_t x = 12345u + uint32_t(rank);
  auto next = [&] { return x = x * 1664525u + 1013904223u; };
  d.pixels.resize(size_t(M * B * S * S * 3));
  d.texture.resize(size_t(M * B * 13 * G * G));
  for (auto& p : d.pixels) p = uint8_t(next() >> 24);
  for (auto& t : d.texture) t = float(next() >> 8) / float(1 << 24) * 2.f - 1.f;
  for (int m = 0; m < M; ++m) {
    MicroBatch mb;
    mb.images = B;
    mb.pixels = d.pixels.data() + size_t(m * B * S * S * 3);
    mb.texture = d.texture.data() + size_t(m * B * 13 * G * G);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int32_t> p{1}, cap;
      for (int k = 0; k < 3; ++k) p.push_back(int32_t(2 + next() % 500));
      for (int k = 0; k < 16; ++k) cap.push_back(int32_t(2 + next() % 500));
      mb.prompt.push_back(p), mb.caption.push_back(cap);
    }
    mb.loss_norm = double(16 * B * M * dp);
    mb.seed = uint64_t(m);
    d.mbs.push_back(std::move(mb));
  }
  return d;
}

struct Result {
  double ms = 0, overlap = 0, exposed = 0;
  double host = 0;  // the host's time in the tasks' bodies (sched::TaskTiming::host_ms)
  std::array<double, sched::kNumStreams> busy{};
};

// The backbone's inputs of the step's micro-batches: micro-batch m's visual[m] tokens
// shared evenly among its images, before each image's prompt and caption, their
// embeddings a constant (the time does not depend on the values; the LmInput holds
// them); and the buffers of the visual rows' gradients. Built once, before timing.
struct BackboneInputs {
  std::vector<LmInput> in;
  std::vector<Tensor> d_visual;
};

BackboneInputs backbone_inputs(Backend& b, const VlmConfig& c, const Data& d, const std::vector<int64_t>& visual) {
  BackboneInputs r;
  const DType act = c.precision == Precision::BF16 ? DType::BF16 : DType::F32;  // the backbone's activations
  for (size_t m = 0; m < d.mbs.size(); ++m) {
    const MicroBatch& mb = d.mbs[m];
    std::vector<VlmSample> samples(size_t(mb.images));
    for (int64_t i = 0; i < mb.images; ++i) {
      VlmSample& x = samples[size_t(i)];
      x.n_visual = int32_t(visual[m] / mb.images + (i < visual[m] % mb.images ? 1 : 0));
      x.prompt = mb.prompt[size_t(i)], x.caption = mb.caption[size_t(i)];
    }
    const Tensor v = Tensor::empty(b, Shape{visual[m], c.llm.d_model}, act);
    fill(b.default_stream(), v, 0.02f);
    r.d_visual.push_back(Tensor::empty(b, v.shape(), act));
    r.in.push_back(make_vlm_input(b, samples, v));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg("bench_step", "the VLM step in serial and overlap mode: time, overlap fraction, exposed communication");
  bench_options().add_to(cfg);
  MpiSession mpi(&argc, &argv);
  int code = 0;
  try {
    if (cfg.parse(argc, argv)) {
      const BenchOptions args = bench_options().read(cfg);
      RuntimeOptions ro;
      ro.device = args.device;
      ro.parallel.tp = args.tp;
      VLM_REQUIRE(mpi.size() % args.tp == 0, "--tp ", args.tp, " must divide the number of ranks ", mpi.size());
      const int M = args.micro_batches;
      Runtime rt = start_runtime(ro);
      Backend& b = rt.backend();
      ProcessGroups& groups = rt.groups();
      auto self = make_communicator(b.device(), MPI_COMM_SELF, "self", 300.0);
      VlmConfig c = bench_config(args);
      c.sharding = DpSharding{args.zero, groups.dp().size(), groups.dp().rank()};
      VlmModel model(c, b, groups.tp(), *self);
      model.init(1);
      model.refresh_working_weights();  // a no-op at fp32
      const Data data = make_data(c, M, groups.dp().size(), groups.dp().rank());
      sched::StreamSet streams(b);
      const std::vector<bool> all(kNumModules, true);
      DpGrads dpg(model.modules(), all, groups.dp(), args.zero, 25, b);
      dpg.attach(model);
      const int steps = args.steps, warmup = args.warmup;
      sched::Trace trace(mpi.rank());
      Result res[2];
      std::vector<int64_t> visual;  // the overlap step's visual tokens per micro-batch
      for (int k = 0; k < 2; ++k) {
        StepOptions o;
        o.mode = k == 0 ? sched::Mode::Serial : sched::Mode::Overlap;
        VlmStep step(model, streams, dpg, all, M, o);
        std::vector<sched::TaskTiming> timings;
        for (int i = 0; i < warmup + steps; ++i) {
          groups.world().barrier(b.default_stream());
          b.synchronize();
          const auto t0 = std::chrono::steady_clock::now();
          model.zero_grads();
          step.run(data.mbs, &timings);
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (i < warmup) continue;
          const sched::StepSummary s = trace.add_step(step.graph(), timings);
          res[k].ms += ms / steps, res[k].overlap += s.overlap_fraction / steps;
          res[k].exposed += s.exposed_comm_ms / steps;
          for (const auto& t : timings) res[k].host += t.host_ms / steps;
          for (int j = 0; j < sched::kNumStreams; ++j) res[k].busy[size_t(j)] += s.busy_ms[size_t(j)] / steps;
        }
        visual = step.visual_tokens();
      }
      // The backbone alone on the same rows, timed as the step (from a synchronised start).
      const BackboneInputs bi = backbone_inputs(b, c, data, visual);
      Backbone& llm = model.llm();
      Stream& s0 = b.default_stream();
      const Tensor loss = Tensor::zeros(b, Shape{1});
      double llm_ms = 0, llm_host = 0;
      for (int i = 0; i < warmup + steps; ++i) {
        b.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        model.zero_grads();
        for (int m = 0; m < M; ++m) {
          llm.forward(s0, bi.in[size_t(m)], loss, true);
          llm.backward(s0, bi.in[size_t(m)], bi.d_visual[size_t(m)]);
        }
        llm.finalize_grads(s0);
        const auto t1 = std::chrono::steady_clock::now();
        b.synchronize();
        if (i >= warmup) llm_host += std::chrono::duration<double, std::milli>(t1 - t0).count() / steps;
        if (i >= warmup) llm_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
      }
      const std::string& trace_path = args.trace;
      if (!trace_path.empty()) {
        const auto events = all_gather_strings(groups.world(), b.default_stream(), trace.events_json());
        if (mpi.rank() == 0) sched::write_trace_file(trace_path, events);
      }
      if (mpi.rank() == 0) {
        std::printf("bench_step: %s, %d rank(s), tp=%d dp=%d, zero=%d, M=%d micro-batches of %lld images, width %lld, "
                    "layers %d + %d, %s, %d steps (+%d warm-up), OMP_NUM_THREADS=%s\n",
                    b.description().c_str(), mpi.size(), args.tp, groups.dp().size(), dpg.zero(), M,
                    (long long)c.max_images, (long long)args.width, args.vision_layers, args.llm_layers,
                    args.precision == Precision::BF16 ? "bf16" : "fp32", steps, warmup,
                    std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(unset)");
        std::printf("%-8s %9s %8s %10s %8s  %s\n", "mode", "ms/step", "overlap", "exp.comm", "host ms",
                    "busy ms per stream (rank 0)");
        for (int k = 0; k < 2; ++k) {
          std::printf("%-8s %9.2f %8.2f %10.2f %8.2f ", k == 0 ? "serial" : "overlap", res[k].ms, res[k].overlap,
                      res[k].exposed, res[k].host);
          for (int j = 0; j < sched::kNumStreams; ++j)
            std::printf(" %s %.2f", sched::stream_names()[size_t(j)].c_str(), res[k].busy[size_t(j)]);
          std::printf("\n");
        }
        std::printf("serial / overlap: %.2f\n", res[0].ms / res[1].ms);
        int64_t rows = 0;
        for (const LmInput& in : bi.in) rows += in.n_tokens;
        std::printf("backbone alone (the same %lld rows, fwd+bwd): %.2f ms/step (host %.2f ms); overlap step / backbone "
                    "alone: %.2f\n",
                    (long long)rows, llm_ms, llm_host, res[1].ms / llm_ms);
        // On CUDA the host only enqueues: when that takes as long as the work, no stream
        // runs ahead, and the front end cannot hide under the backbone.
        if (b.device() == DeviceKind::CUDA && res[1].host > 0.8 * res[1].ms)
          std::printf("host-bound: the overlap step's bodies took %.2f ms of host time for a %.2f ms step; the "
                      "streams wait for the host (larger micro-batches: --images, --width)\n",
                      res[1].host, res[1].ms);
        if (!trace_path.empty()) std::printf("trace: %s (%d steps per rank)\n", trace_path.c_str(), trace.steps());
      }
    }
  } catch (const UserError& e) {
    code = report_command_error("bench_step", e);
  }
  return code;
}

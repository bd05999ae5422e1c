// The rig of the VLM step tests (test_step.cpp, test_mixed_precision*.cpp,
// test_step_cuda.cpp, tests/parallel/test_nccl_cuda.cpp): a tiny VLM, a synthetic global
// batch of kImages samples, its micro-batches per DP rank, the gradients of a model as
// one vector, a one-rank model and step on a backend, the process groups of a (tp, dp)
// layout, the serial == overlap check, and every layout against one rank.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "model/vlm_model.h"
#include "optim/dp_grads.h"
#include "optim/optimizer.h"
#include "parallel/groups.h"
#include "parallel/topology.h"
#include "scheduler/streams.h"
#include "tests/support/metrics.h"
#include "tests/support/mpi.h"
#include "tests/support/rng.h"
#include "train/step.h"

namespace vlm {
namespace {

[[maybe_unused]] double rel(double a, double e) { return std::fabs(a - e) / std::max(std::fabs(e), 1e-12); }

constexpr int kImages = 8;  // global batch
constexpr int kM = 2;       // micro-batches per step

VlmConfig tiny_config(int max_images) {
  VlmConfig c;
  c.vision.image_size = 16, c.vision.patch = 4, c.vision.d_model = 16, c.vision.n_layers = 1;
  c.vision.n_heads = 2, c.vision.d_ff = 32;
  c.scorers.lod.region = 2, c.scorers.lod.min_tokens = 4, c.scorers.lod.max_tokens = 10;
  c.scorers.lod.fixed_budget = 0;
  c.scorers.scorers.hidden = 8;
  c.llm.family = ModelFamily::Llama, c.llm.vocab_size = 50, c.llm.d_model = 32, c.llm.n_layers = 2;
  c.llm.n_heads = 4, c.llm.n_kv_heads = 4, c.llm.d_ff = 64, c.llm.tied_embeddings = false;
  c.max_images = max_images, c.max_text = 12;
  c.front_slots = 2;  // kM >= 2: micro-batch m+1's front end during m's backbone (train/step.h)
  return c;
}

// tiny_config under train.precision=bf16.
[[maybe_unused]] VlmConfig bf16_config(int max_images) {
  VlmConfig c = tiny_config(max_images);
  c.precision = Precision::BF16;
  return c;
}

// The global batch: kImages samples (pixels, texture, prompt, caption), the same on every rank.
struct GlobalBatch {
  std::vector<uint8_t> pixels;
  std::vector<float> texture;
  std::vector<std::vector<int32_t>> prompt, caption;
};

// `images` samples (kImages by default); token ids in [1, 49] (tiny_config's vocabulary).
GlobalBatch make_batch(uint64_t seed, const VlmConfig& c, int images = kImages) {
  test::Rng rng(seed);
  GlobalBatch g;
  const int S = c.vision.image_size, G = c.vision.grid();
  for (int i = 0; i < images * S * S * 3; ++i) g.pixels.push_back(uint8_t(rng.randint(0, 255)));
  for (int i = 0; i < images * 13 * G * G; ++i) g.texture.push_back(float(rng.uniform(-1, 1)));
  for (int i = 0; i < images; ++i) {
    std::vector<int32_t> p{1}, cap;
    for (int k = 0, n = 1 + i % 3; k < n; ++k) p.push_back(rng.randint(2, 49));
    for (int k = 0, n = 2 + i % 4; k < n; ++k) cap.push_back(rng.randint(2, 49));
    g.prompt.push_back(p), g.caption.push_back(cap);
  }
  return g;
}

// Micro-batch m of DP rank r out of dp (the sampler's order: step slices, then ranks),
// the global batch split into dp x M micro-batches.
std::vector<MicroBatch> shard(const GlobalBatch& g, const VlmConfig& c, int dp, int r, int M) {
  const int per = int(g.caption.size()) / (dp * M), S = c.vision.image_size, G = c.vision.grid();
  int64_t counted = 0;
  for (const auto& x : g.caption) counted += int64_t(x.size());
  std::vector<MicroBatch> out;
  for (int m = 0; m < M; ++m) {
    const int first = m * per * dp + r * per;
    MicroBatch mb;
    mb.images = per;
    mb.pixels = g.pixels.data() + size_t(first) * S * S * 3;
    mb.texture = g.texture.data() + size_t(first) * 13 * G * G;
    mb.prompt.assign(g.prompt.begin() + first, g.prompt.begin() + first + per);
    mb.caption.assign(g.caption.begin() + first, g.caption.begin() + first + per);
    mb.loss_norm = double(counted);
    mb.seed = uint64_t(m);
    out.push_back(std::move(mb));
  }
  return out;
}

// c with its tables sharded for ZeRO level `zero` over the DP group `dp` (nn/param_layout.h).
[[maybe_unused]] VlmConfig sharded(VlmConfig c, int zero, const Communicator& dp) {
  c.sharding = DpSharding{zero, dp.size(), dp.rank()};
  return c;
}

// The trainable modules' values of this rank as one vector: each module's flat space
// (nn/param_layout.h) rebuilt from the DP ranks' shards (a collective over DP, on s: a
// stream of the model's backend).
[[maybe_unused]] std::vector<float> all_values(VlmModel& model, const DpGrads& dpg, Stream& s) {
  std::vector<float> v;
  for (size_t i = 0; i < model.modules().size(); ++i) {
    const auto x = dpg.gather_flat(s, i, dpg.owned_values(i));
    v.insert(v.end(), x.begin(), x.end());
  }
  return v;
}

std::vector<float> all_grads(VlmModel& model) {
  std::vector<float> v;
  for (const ModuleParams& m : model.modules())
    for (const Param& p : m.table->params()) {
      const auto x = to_vector_f32(p.grad);
      v.insert(v.end(), x.begin(), x.end());
    }
  return v;
}

// One rank, TP = DP = 1 (size-1 communicators on b's device: MPI on the CPU, NCCL on
// CUDA): the model of config c on backend b initialised from `seed`, its streams, its DP
// reduction and its step over kM micro-batches in mode o.mode, the modules of
// `trainable` training (every one by default).
struct OneRankStep {
  std::unique_ptr<Communicator> tp, dp, self;
  std::unique_ptr<VlmModel> model;
  std::unique_ptr<sched::StreamSet> streams;
  std::unique_ptr<DpGrads> dpg;
  std::unique_ptr<VlmStep> step;

  OneRankStep(const VlmConfig& c, uint64_t seed, const std::vector<bool>& trainable = std::vector<bool>(kNumModules, true),
              Backend& b = cpu_backend(), const StepOptions& o = StepOptions{})
      : tp(test::self_comm("tp", b.device())), dp(test::self_comm("dp", b.device())),
        self(test::self_comm("self", b.device())) {
    model = std::make_unique<VlmModel>(c, b, *tp, *self);
    model->init(seed);
    model->refresh_working_weights();  // a no-op at fp32
    streams = std::make_unique<sched::StreamSet>(b);
    dpg = std::make_unique<DpGrads>(model->modules(), trainable, *dp, 0, 25, b);
    step = std::make_unique<VlmStep>(*model, *streams, *dpg, trainable, kM, o);
  }
};

// One rank's world for a (tp, dp) layout over MPI_COMM_WORLD, its communicators on `device`.
struct Layout {
  std::unique_ptr<ProcessGroups> groups;
  std::unique_ptr<Communicator> self;
  explicit Layout(int tp, DeviceKind device = DeviceKind::CPU) {
    const Topology t = Topology::compute(test::world_size(), test::world_rank(), test::world_size(), tp);
    groups = std::make_unique<ProcessGroups>(t, device, 120.0);
    self = test::self_comm("self", device);
  }
};

std::vector<int> layouts_tp() {
  const int n = test::world_size();
  std::vector<int> tps;
  for (int tp = 1; tp <= n; tp *= 2)
    if (n % tp == 0 && 4 % tp == 0) tps.push_back(tp);  // tiny_config has 4 heads
  return tps;
}

// At every layout the world allows, one step of the model config(max_images) in serial
// and in overlap mode (at tp > 1 with the TP side stream, nn/tp_side.h) gives bitwise
// equal loss and gradients (DP buckets of 10 KiB on the
// grad_wire dtype, so several of them).
[[maybe_unused]] void expect_serial_equals_overlap(VlmConfig (*config)(int), DType grad_wire) {
  Backend& b = cpu_backend();
  const GlobalBatch g = make_batch(7, tiny_config(kImages));
  for (int tp : layouts_tp()) {
    Layout L(tp);
    const int dp = test::world_size() / tp, r = L.groups->dp().rank();
    const VlmConfig c = config(kImages / (dp * kM));
    VlmModel model(c, b, L.groups->tp(), *L.self);
    model.init(3);
    model.refresh_working_weights();  // a no-op at fp32
    sched::StreamSet streams(b);
    const std::vector<bool> all(kNumModules, true);
    const auto mbs = shard(g, c, dp, r, kM);
    std::vector<float> grads[2];
    double loss[2];
    for (int k = 0; k < 2; ++k) {
      StepOptions o;
      o.mode = k == 0 ? sched::Mode::Serial : sched::Mode::Overlap;
      DpGrads dpg(model.modules(), all, L.groups->dp(), 0, 0.01, b, grad_wire);
      VlmStep step(model, streams, dpg, all, kM, o);
      model.zero_grads();
      loss[k] = step.run(mbs);
      grads[k] = all_grads(model);
      // Overlap mode at tp > 1: the backbone's input-gradient reductions on the side stream.
      EXPECT_EQ(step.side_collectives() > 0, k == 1 && tp > 1) << "tp=" << tp << " " << sched::mode_name(o.mode);
    }
    SCOPED_TRACE("tp=" + std::to_string(tp) + " dp=" + std::to_string(dp));
    EXPECT_EQ(loss[0], loss[1]);
    ASSERT_EQ(grads[0].size(), grads[1].size());
    size_t diff = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) diff += grads[0][i] != grads[1][i];
    EXPECT_EQ(diff, 0u) << "gradient elements that differ between serial and overlap";
  }
}

// At every layout the world allows, at every ZeRO level 0-3, on backend b: the loss and the
// gradient norm of two steps (AdamW between them, so the second sees the first update)
// within tol relative and, at tp = 1, the updated weights within weight_tol of their
// scale (rebuilt from the DP shards), against the (1,1) run over the whole global batch
// on this rank alone.
[[maybe_unused]] void expect_every_layout_matches_one_rank(Backend& b, double tol, double weight_tol) {
  const GlobalBatch g = make_batch(11, tiny_config(kImages));
  OptimOptions oo;
  oo.lr = 1e-2;
  auto run = [&](Communicator& tp, Communicator& dp, Communicator& self, int dps, int r, int zero,
                 std::vector<float>* w) {
    const VlmConfig c = sharded(tiny_config(kImages / (dps * kM)), zero, dp);
    VlmModel model(c, b, tp, self);
    model.init(5);
    sched::StreamSet streams(b);
    const std::vector<bool> all(kNumModules, true);
    DpGrads dpg(model.modules(), all, dp, zero, 25, b);
    dpg.attach(model);
    VlmStep step(model, streams, dpg, all, kM, StepOptions{});
    AdamW opt(model.modules(), all, dpg, b, oo);
    double loss = 0, norm = 0;
    for (int k = 1; k <= 2; ++k) {  // the second step sees the first update (ZeRO's all-gathers)
      model.zero_grads();
      loss = all_reduce_values(dp, b.default_stream(), {step.run(shard(g, c, dps, r, kM))})[0];
      norm = opt.grad_norm(b.default_stream(), tp);
      opt.step(b.default_stream(), k, oo.lr, 1.f);
    }
    // The updated weights of every module (this rank's backbone slices), from the shards.
    *w = all_values(model, dpg, b.default_stream());
    return std::make_pair(loss, norm);
  };
  const DeviceKind dev = b.device();
  auto self1 = test::self_comm("a", dev), self2 = test::self_comm("b", dev), self3 = test::self_comm("c", dev);
  for (int tp : layouts_tp()) {
    // The reference: (1,1) on this rank alone, with this layout's TP slices of the backbone
    // compared through the full weights of a TP=1 run, so compare at tp = 1 only.
    std::vector<float> w_ref;
    const auto ref = run(*self1, *self2, *self3, 1, 0, 0, &w_ref);
    Layout L(tp, dev);
    const int dp = test::world_size() / tp;
    for (int zero : {0, 1, 2, 3}) {
      std::vector<float> w;
      const auto got = run(L.groups->tp(), L.groups->dp(), *L.self, dp, L.groups->dp().rank(), zero, &w);
      SCOPED_TRACE("tp=" + std::to_string(tp) + " dp=" + std::to_string(dp) + " zero=" + std::to_string(zero));
      EXPECT_LE(rel(got.first, ref.first), tol) << got.first << " vs " << ref.first;
      EXPECT_LE(rel(got.second, ref.second), tol) << got.second << " vs " << ref.second;
      if (tp == 1) {  // Adam's m/sqrt(v) magnifies the rounding of near-zero gradients
        EXPECT_LE(test::max_rel_err(w, w_ref), weight_tol);
      }
    }
  }
}

}  // namespace
}  // namespace vlm

// The rig of the VLM step tests (test_step.cpp, test_mixed_precision.cpp): a tiny VLM,
// a synthetic global batch of kImages samples, its micro-batches per DP rank, the
// gradients of a model as one vector, a one-rank model and step, the process groups of a
// (tp, dp) layout, and the serial == overlap check both files run.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "model/vlm_model.h"
#include "optim/dp_grads.h"
#include "parallel/groups.h"
#include "parallel/topology.h"
#include "scheduler/streams.h"
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
// (nn/param_layout.h) rebuilt from the DP ranks' shards (a collective over DP).
[[maybe_unused]] std::vector<float> all_values(VlmModel& model, const DpGrads& dpg) {
  std::vector<float> v;
  for (size_t i = 0; i < model.modules().size(); ++i) {
    const auto x = dpg.gather_flat(cpu_backend().default_stream(), i, dpg.owned_values(i));
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

// One rank, TP = DP = 1 (size-1 communicators): the model of config c initialised from
// `seed`, its streams, its DP reduction and its step over kM micro-batches, the modules
// of `trainable` training (every one by default).
struct OneRankStep {
  std::unique_ptr<Communicator> tp = test::self_comm("tp"), dp = test::self_comm("dp"), self = test::self_comm("self");
  std::unique_ptr<VlmModel> model;
  std::unique_ptr<sched::StreamSet> streams;
  std::unique_ptr<DpGrads> dpg;
  std::unique_ptr<VlmStep> step;

  OneRankStep(const VlmConfig& c, uint64_t seed, const std::vector<bool>& trainable = std::vector<bool>(kNumModules, true)) {
    Backend& b = cpu_backend();
    model = std::make_unique<VlmModel>(c, b, *tp, *self);
    model->init(seed);
    streams = std::make_unique<sched::StreamSet>(b);
    dpg = std::make_unique<DpGrads>(model->modules(), trainable, *dp, 0, 25, b);
    step = std::make_unique<VlmStep>(*model, *streams, *dpg, trainable, kM, StepOptions{});
  }
};

// One rank's world for a (tp, dp) layout over MPI_COMM_WORLD.
struct Layout {
  std::unique_ptr<ProcessGroups> groups;
  std::unique_ptr<Communicator> self;
  Layout(int tp) {
    const Topology t = Topology::compute(test::world_size(), test::world_rank(), test::world_size(), tp);
    groups = std::make_unique<ProcessGroups>(t, DeviceKind::CPU, 120.0);
    self = test::self_comm("self");
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

}  // namespace
}  // namespace vlm

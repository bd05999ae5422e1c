// The VLM step (train/step.h) and optimizer (optim/optimizer.h) on synthetic
// micro-batches, under mpirun with 1, 2 or 4 ranks:
//  - serial and overlap modes give bitwise equal losses and gradients at every layout
//    (tp, dp) the world allows: (1,1); (2,1), (1,2); (2,2), (4,1);
//  - with dp > 1 the first DP bucket task of the backbone does not wait for the last
//    micro-batch's last backward chunk (the backbone's layers reduced in chunks);
//  - every layout, at every ZeRO level 0-3, gives the loss and the gradient norm of two
//    steps (to 1e-5 relative) and, at tp = 1, the updated weights (rebuilt from the DP
//    shards; to 1e-4 of their scale) of the (1,1) run over the whole global batch on one
//    rank (the reference);
//  - a frozen module is bitwise unchanged after 5 AdamW steps and has no optimizer
//    state, while the others learn (the loss of a repeated batch falls);
//  - weight decay shrinks the matrices by lr * wd and leaves the vectors and the
//    position, level and texture embeddings as they were;
//  - a frozen module has no gradient memory (no arena, undefined gradients), and
//    freezing any module (or vision + llm, LLaVA's stage 1) leaves the other modules'
//    gradients bitwise those of the unfrozen model.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/init.h"
#include "optim/dp_grads.h"
#include "optim/optimizer.h"
#include "parallel/groups.h"
#include "parallel/topology.h"
#include "scheduler/streams.h"
#include "scorers/scratch.h"
#include "tests/support/metrics.h"
#include "tests/support/mpi.h"
#include "tests/support/rng.h"
#include "tests/train/step_rig.h"
#include "train/step.h"
#include "vision/patch_embed.h"

namespace vlm {
namespace {

TEST(VlmStep, SerialAndOverlapAreBitwiseEqual) { expect_serial_equals_overlap(tiny_config, DType::F32); }

// DP > 1: the backbone's gradients are reduced in layer chunks as the last micro-batch's
// backward completes them (train/step.h). The first dp.llm bucket task (the top layer
// and the head) does not depend, even through other tasks, on the last backward chunk
// (the bottom layer and the embedding), so `comm` runs it while `llm` still runs that
// chunk; and the backbone's dp tasks send exactly DpGrads::bytes.
TEST(VlmStep, BackboneBucketsDoNotWaitForTheLastBackwardChunk) {
  Backend& b = cpu_backend();
  int checked = 0;
  for (int tp : layouts_tp()) {
    Layout L(tp);
    const int dp = test::world_size() / tp;
    if (dp == 1) continue;
    const VlmConfig c = tiny_config(kImages / (dp * kM));
    VlmModel model(c, b, L.groups->tp(), *L.self);
    sched::StreamSet streams(b);
    const std::vector<bool> all(kNumModules, true);
    const auto [l0_begin, l0_end] = model.llm_grad_range(0, 1);  // one bucket = one layer's gradients
    const double bucket_mb = (double(l0_end - l0_begin) + 0.5) * 4 / (1024.0 * 1024.0);
    DpGrads dpg(model.modules(), all, L.groups->dp(), 0, bucket_mb, b);
    VlmStep step(model, streams, dpg, all, kM, StepOptions{});
    const sched::Graph& g = step.graph();
    auto index = [&](const std::string& n) {
      for (size_t i = 0; i < g.size(); ++i)
        if (g.task(i).name == n) return int(i);
      return -1;
    };
    const std::string last = std::string(".") + std::to_string(kM - 1);
    int chunks = 0;
    while (index("llm.bwd" + std::to_string(chunks) + last) >= 0) ++chunks;
    SCOPED_TRACE("tp=" + std::to_string(tp) + " dp=" + std::to_string(dp));
    ASSERT_EQ(chunks, c.llm.n_layers);
    const int first = index("dp.llm0"), top = index("llm.bwd0" + last),
              bottom = index("llm.bwd" + std::to_string(chunks - 1) + last);
    ASSERT_GE(first, 0);
    EXPECT_EQ(index("llm" + last), -1) << "the last micro-batch's llm task is split";
    std::vector<bool> before(g.size(), false);  // every task dp.llm0 waits for
    std::vector<int> todo{first};
    while (!todo.empty()) {
      const int t = todo.back();
      todo.pop_back();
      for (int d : g.deps(size_t(t)))
        if (!before[size_t(d)]) before[size_t(d)] = true, todo.push_back(d);
    }
    EXPECT_TRUE(before[size_t(top)]) << "dp.llm0 must wait for the top layer's backward";
    EXPECT_FALSE(before[size_t(bottom)]) << "dp.llm0 waits for the last backward chunk";
    size_t bytes = 0;
    for (size_t i = 0; i < g.size(); ++i)
      if (g.task(i).name.rfind("dp.llm", 0) == 0) bytes += g.task(i).bytes;
    EXPECT_EQ(bytes, dpg.bytes(size_t(ModuleId::Llm)));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no layout with dp > 1 on " << test::world_size() << " rank(s)";
}

// Loss, grad norm and one AdamW step of a layout against the (1,1) run on this rank alone.
TEST(VlmStep, EveryLayoutMatchesOneRank) { expect_every_layout_matches_one_rank(cpu_backend(), 1e-5, 1e-4); }

// Every module receives a gradient through the whole chain (backbone -> projector ->
// LOD tokens -> scorers and encoder features -> encoder), in every parameter tensor that
// the micro-batch reaches.
TEST(VlmStep, EveryModuleGetsAGradient) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  const VlmConfig c = tiny_config(kImages / kM);
  const GlobalBatch g = make_batch(17, c);
  OneRankStep r(c, 4);
  VlmModel& model = *r.model;
  model.zero_grads();
  r.step->run(shard(g, c, 1, 0, kM));
  for (const ModuleParams& m : model.modules()) {
    double sq = 0;
    for (float x : to_vector_f32(m.table->grads())) sq += double(x) * x;
    EXPECT_GT(sq, 0.0) << module_name(m.id) << " got no gradient";
  }
  for (const char* name : {"embeddings.patch_embedding.weight", "encoder.layers.0.self_attn.q_proj.weight"}) {
    double sq = 0;
    for (float x : to_vector_f32(model.vision().params().get(name).grad)) sq += double(x) * x;
    EXPECT_GT(sq, 0.0) << name;
  }
}

// After the first step, a step allocates no scorer scratch, though the number of visual
// tokens changes from step to step (the buffers that follow it are
// reserved for the largest count: RelevanceStage::reserve); the other buffers of the
// step are planned at construction (train/step.h).
TEST(VlmStep, StepsAfterTheFirstAllocateNoScratch) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  const VlmConfig c = tiny_config(kImages / kM);
  OneRankStep r(c, 4);
  VlmModel& model = *r.model;
  VlmStep& step = *r.step;
  uint64_t after_first = 0;
  std::vector<int64_t> visual;  // the last micro-batch's visual tokens, per step
  ParamTable* scorers = nullptr;
  for (const ModuleParams& m : model.modules())
    if (m.id == ModuleId::Scorers) scorers = m.table;
  ASSERT_NE(scorers, nullptr);
  for (int k = 0; k < 6; ++k) {
    // A propositional bias from -5 to 5 moves the mean relevance, hence the token counts.
    scorers->set_full("scorers.propositional.b2", Tensor::from_vector(std::vector<float>{2.f * float(k) - 5.f}, Shape{1}));
    const GlobalBatch g = make_batch(100 + uint64_t(k), c);
    model.zero_grads();
    step.run(shard(g, c, 1, 0, kM));
    visual.push_back(model.visual_offsets().back());
    // The step's count per micro-batch: within the allocator's bounds, the last one the model's.
    ASSERT_EQ(step.visual_tokens().size(), size_t(kM));
    const int64_t B = kImages / kM;
    for (int64_t v : step.visual_tokens()) {
      EXPECT_GE(v, B * c.scorers.lod.min_tokens);
      EXPECT_LE(v, B * c.scorers.lod.max_tokens);
    }
    EXPECT_EQ(step.visual_tokens().back(), visual.back());
    if (k == 0) after_first = scratch_blocks_allocated();
  }
  EXPECT_EQ(scratch_blocks_allocated(), after_first) << "scratch blocks allocated after the first step";
  std::sort(visual.begin(), visual.end());
  EXPECT_GT(std::unique(visual.begin(), visual.end()) - visual.begin(), 1)
      << "the visual token count never changed: the test would not show a growth";
}

// Two front-end slots (micro-batch m+1's front end during m's backbone; the second
// slot's encoder shares the first's parameters) give the loss and gradients of one slot
// bitwise: every gradient is accumulated in the same order, the encoder's two backward
// passes into the one arena included.
TEST(VlmStep, TwoFrontSlotsGiveTheGradientsOfOne) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  const GlobalBatch g = make_batch(23, tiny_config(kImages));
  double loss[2];
  std::vector<float> grads[2];
  for (int slots = 1; slots <= 2; ++slots) {
    VlmConfig c = tiny_config(kImages / kM);
    c.front_slots = slots;
    OneRankStep r(c, 5);
    ASSERT_EQ(r.step->front_slots(), slots);
    r.model->zero_grads();
    loss[slots - 1] = r.step->run(shard(g, c, 1, 0, kM));
    grads[slots - 1] = all_grads(*r.model);
  }
  EXPECT_EQ(loss[0], loss[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  size_t diff = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) diff += grads[0][i] != grads[1][i];
  EXPECT_EQ(diff, 0u) << "gradient elements that differ between one and two front-end slots";
}

TEST(VlmStep, FrozenModuleIsUnchangedAndTheRestLearns) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  VlmConfig c = tiny_config(kImages / kM);
  c.frozen[size_t(ModuleId::Vision)] = true;
  const GlobalBatch g = make_batch(13, c);
  std::vector<bool> trainable(kNumModules, true);
  trainable[size_t(ModuleId::Vision)] = false;
  OneRankStep r(c, 9, trainable);
  VlmModel& model = *r.model;
  VlmStep& step = *r.step;
  const auto before = to_vector_f32(model.vision().params().values());
  OptimOptions oo;
  oo.lr = 3e-3;
  AdamW opt(model.modules(), trainable, *r.dpg, b, oo);
  std::vector<double> losses;
  const auto mbs = shard(g, c, 1, 0, kM);
  for (int k = 1; k <= 5; ++k) {
    model.zero_grads();
    losses.push_back(step.run(mbs));
    opt.grad_norm(b.default_stream(), *r.tp);
    opt.step(b.default_stream(), k, oo.lr, 1.f);
  }
  const auto after = to_vector_f32(model.vision().params().values());
  EXPECT_EQ(before, after) << "the frozen encoder changed";
  // No optimizer state for the frozen encoder: 2 moments of every element of the other
  // modules' flat spaces (parameters + alignment padding).
  size_t expect = 0;
  for (const ModuleParams& m : model.modules())
    if (m.id != ModuleId::Vision) expect += 2 * size_t(m.table->layout().numel()) * 4;
  EXPECT_EQ(opt.state_bytes(), expect);
  EXPECT_EQ(model.vision().params().grad_bytes(), 0u);
  EXPECT_LT(losses.back(), 0.9 * losses.front()) << "the trainable modules did not learn";
}

// Decoupled weight decay (optim/optimizer.h): with zero gradients one AdamW step is the
// decay alone, p - lr * wd * p, on every matrix (the three scorers' alike), and leaves
// bitwise as they were the vectors (norm weights, biases, queries) and exactly the
// position, level and texture embeddings.
TEST(VlmStep, WeightDecayShrinksTheMatricesAndNothingElse) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  VlmConfig c = tiny_config(kImages / kM);
  c.vision.texture = true;
  OneRankStep r(c, 9);
  VlmModel& model = *r.model;
  model.zero_grads();
  OptimOptions oo;
  oo.lr = 0.5, oo.weight_decay = 0.25f;
  AdamW opt(model.modules(), std::vector<bool>(kNumModules, true), *r.dpg, b, oo);
  std::vector<std::vector<float>> before;
  for (const ModuleParams& m : model.modules())
    for (const Param& p : m.table->params()) before.push_back(to_vector_f32(p.value));
  EXPECT_EQ(opt.grad_norm(b.default_stream(), *r.tp), 0.0);
  opt.step(b.default_stream(), 1, oo.lr, 1.f);
  std::set<std::string> kept_matrices, decayed;
  int vectors = 0;
  size_t k = 0;
  for (const ModuleParams& m : model.modules())
    for (const Param& p : m.table->params()) {
      const std::vector<float>& was = before[k++];
      const std::vector<float> now = to_vector_f32(p.value);
      std::vector<float> shrunk(was.size());
      for (size_t i = 0; i < was.size(); ++i) shrunk[i] = was[i] * (1.f - float(oo.lr) * oo.weight_decay);
      if (now == was) {
        if (p.spec.full.ndim() >= 2) kept_matrices.insert(p.spec.name);
        else ++vectors;
      } else {
        EXPECT_GE(p.spec.full.ndim(), 2) << p.spec.name << ": a vector decayed";
        EXPECT_LE(test::max_rel_err(now, shrunk), 1e-6) << p.spec.name;
        decayed.insert(p.spec.name);
      }
    }
  EXPECT_GT(vectors, 0);
  EXPECT_EQ(kept_matrices, (std::set<std::string>{kPositionTable, kTextureWeight, "scorers.lod.level",
                                                  "scorers.lod.pos_x", "scorers.lod.pos_y"}));
  for (const char* s : {"propositional", "perspectival", "participatory"})
    EXPECT_TRUE(std::any_of(decayed.begin(), decayed.end(),
                            [&](const std::string& n) { return n.rfind(cat("scorers.", s, "."), 0) == 0; }))
        << "no matrix of the " << s << " scorer decayed";
}

// Freezing skips the frozen module's weight gradients and nothing else: the trainable
// modules' gradients are bitwise those of the same step on the unfrozen model.
TEST(VlmStep, FreezingAllocatesNoGradientsAndChangesNoOtherGradient) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  const GlobalBatch g = make_batch(21, tiny_config(kImages / kM));
  const std::vector<std::vector<ModuleId>> cases = {
      {ModuleId::Vision}, {ModuleId::Scorers}, {ModuleId::Projector}, {ModuleId::Llm}, {ModuleId::Vision, ModuleId::Llm}};
  for (const auto& frozen : cases) {
    std::vector<bool> trainable(kNumModules, true);
    VlmConfig cf = tiny_config(kImages / kM);
    for (ModuleId m : frozen) trainable[size_t(m)] = false, cf.frozen[size_t(m)] = true;
    // The step of one model (config c) with the trainable flags above; its gradients.
    auto grads_of = [&](const VlmConfig& c) {
      auto r = std::make_unique<OneRankStep>(c, 5, trainable);
      r->model->zero_grads();
      r->step->run(shard(g, c, 1, 0, kM));
      return r;
    };
    const auto a = grads_of(cf), ref = grads_of(tiny_config(kImages / kM));
    const std::vector<ModuleParams> ma = a->model->modules(), mr = ref->model->modules();
    for (size_t i = 0; i < ma.size(); ++i) {
      const std::string name = module_name(ma[i].id);
      if (!trainable[i]) {
        EXPECT_EQ(ma[i].table->grad_bytes(), 0u) << name << " frozen";
        EXPECT_GT(mr[i].table->grad_bytes(), 0u) << name;
        for (const Param& p : ma[i].table->params()) EXPECT_FALSE(p.grad.defined()) << p.spec.name;
        continue;
      }
      for (size_t k = 0; k < ma[i].table->params().size(); ++k) {
        const Param &pa = ma[i].table->params()[k], &pr = mr[i].table->params()[k];
        EXPECT_EQ(to_vector_f32(pa.grad), to_vector_f32(pr.grad)) << pa.spec.name << " with " << frozen.size()
                                                                  << " frozen, first " << module_name(frozen[0]);
      }
    }
  }
}

}  // namespace
}  // namespace vlm

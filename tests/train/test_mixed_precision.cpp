// Mixed precision (train.precision=bf16, docs/training.md, "Numerics"), one test per cast point,
// on the tiny VLM of the step tests (step_rig.h), under mpirun with 1, 2 or 4 ranks:
//  - weights: every matrix parameter has a bf16 working copy equal to bf16(master),
//    rewritten by the AdamW step itself (no refresh_working_weights after it) at zero 0
//    and 1, the f32-read embeddings' copies too; master weights,
//    gradients and AdamW moments are f32 (dtypes checked); the memory term
//    (ParamTable::bf16_copy_bytes) is 2 bytes per matrix element;
//  - activations: bf16 tensors (the model's arenas at most 55% of fp32's); a bf16
//    Linear's output is the f32 GEMM of the bf16 operands rounded, a Norm's bf16 output
//    is its f32 output rounded while its statistics stay f32; the backbone's logits and
//    the encoder's features are bf16 values, the per-token losses are not (f32 loss);
//  - gradients: two micro-batches accumulate in f32 (their sum matches the sum of the
//    micro-batches' separate gradients to 1e-6; a bf16 accumulation is off by ~1e-3);
// Serial against overlap and every layout in bf16: test_mixed_precision_layouts.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/ops.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "optim/dp_grads.h"
#include "optim/optimizer.h"
#include "scheduler/streams.h"
#include "tests/support/mpi.h"
#include "tests/train/step_rig.h"
#include "train/step.h"

namespace vlm {
namespace {

float round_bf16_host(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Elements of v that are not bf16 values.
size_t not_bf16(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += round_bf16_host(x) != x;
  return n;
}

TEST(MixedPrecision, WeightsAreABf16CopyOfF32MastersAndTheStateIsF32) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  auto tp = test::self_comm("tp"), dp = test::self_comm("dp"), self = test::self_comm("self");
  // zero 0: the update writes every copy; zero 1: the all-gather writes the bf16-form
  // parameters' (the f32-read embeddings' at dp > 1: train_zero).
  for (int zero : {0, 1}) {
    SCOPED_TRACE(cat("zero ", zero));
    const VlmConfig c = sharded(bf16_config(kImages / kM), zero, *dp);
    VlmModel model(c, b, *tp, *self);
    model.init(3);
    model.refresh_working_weights();
    // The copies as bf16 values; `stale` counts those that are not bf16(master).
    auto copies = [&](size_t& stale) {
      std::vector<float> all;
      for (const ModuleParams& m : model.modules()) {
        if (m.id == ModuleId::Scorers) {  // the scorers stay f32 (docs/training.md, "Numerics")
          EXPECT_FALSE(m.table->has_working());
          continue;
        }
        size_t copy_bytes = 0;
        for (const Param& p : m.table->params()) {
          EXPECT_EQ(p.value.dtype(), DType::F32) << p.spec.name;
          EXPECT_EQ(p.grad.dtype(), DType::F32) << p.spec.name;
          EXPECT_EQ(p.work.defined(), p.local.ndim() >= 2) << p.spec.name << ": a copy for matrices only";
          if (!p.work.defined() || !p.value.defined()) continue;
          EXPECT_EQ(p.work.dtype(), DType::BF16) << p.spec.name;
          copy_bytes += size_t(p.local.numel()) * 2;
          const std::vector<float> v = to_vector_f32(p.value);
          Tensor w = Tensor::empty(b, p.local, DType::F32);
          convert(b.default_stream(), w, p.work);
          const std::vector<float> got = to_vector_f32(w);
          for (size_t i = 0; i < v.size(); ++i) stale += got[i] != round_bf16_host(v[i]);
          all.insert(all.end(), got.begin(), got.end());
        }
        if (zero == 0) {
          EXPECT_EQ(m.table->bf16_copy_bytes(), copy_bytes) << module_name(m.id);
        }
        EXPECT_GE(m.table->working_bytes(), copy_bytes) << module_name(m.id);
      }
      return all;
    };
    size_t stale = 0;
    const std::vector<float> before = copies(stale);
    EXPECT_EQ(stale, 0u) << "working-copy elements that are not bf16(master)";
    EXPECT_GT(model.working_weight_bytes(), 0u);

    sched::StreamSet streams(b);
    const std::vector<bool> all(kNumModules, true);
    DpGrads dpg(model.modules(), all, *dp, zero, 25, b);
    dpg.attach(model);
    VlmStep step(model, streams, dpg, all, kM, StepOptions{});
    OptimOptions oo;
    oo.lr = 1e-2;
    AdamW opt(model.modules(), all, dpg, b, oo);
    model.zero_grads();
    const double loss = step.run(shard(make_batch(5, c), c, 1, 0, kM));
    EXPECT_TRUE(std::isfinite(loss));
    opt.step(b.default_stream(), 1, oo.lr, 1.f);  // no refresh_working_weights: the step keeps the copies
    for (size_t i = 0; i < model.modules().size(); ++i)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(opt.moment(i, k).dtype(), DType::F32) << "module " << i << " moment " << k;
    const std::vector<float> after = copies(stale);
    EXPECT_EQ(stale, 0u) << "working-copy elements that are not bf16 of the updated master";
    ASSERT_EQ(after.size(), before.size());
    size_t changed = 0;
    for (size_t i = 0; i < after.size(); ++i) changed += after[i] != before[i];
    EXPECT_GT(changed, after.size() / 2) << "the optimizer step changed few copies";
  }
}

TEST(MixedPrecision, LinearAndNormRoundTheirOutputsNotTheirStatistics) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  Stream& s = b.default_stream();
  const int64_t N = 5, K = 24, M = 7;
  ParamTable t({param_spec("w", Shape{M, K}, -1, InitKind::Normal, 0.5f), param_spec("b", Shape{M}, -1, InitKind::Normal, 0.5f),
                param_spec("nw", Shape{K}, -1, InitKind::Normal, 0.5f), param_spec("nb", Shape{K}, -1, InitKind::Normal, 0.5f)},
               1, 0);
  t.add_bf16_working_copy();
  t.allocate(b);
  test::Rng rng(9);
  auto rand = [&](Shape sh) {
    std::vector<float> v(size_t(sh.numel()));
    for (float& x : v) x = float(rng.uniform(-2, 2));
    return Tensor::from_vector(v, sh);
  };
  for (const char* n : {"w", "b", "nw", "nb"}) copy_tensor(t.get(n).value, rand(t.get(n).local));
  t.refresh_working(s);

  // Linear: y = round(bf16(x) bf16(W)^T + bf16(b)), the GEMM in f32 (exact products), the
  // f32 bias added as bf16 values (core/ops/gemm.inc); x and y are bf16 tensors (the
  // activations under bf16).
  const Linear lin = Linear::bind(t, "w", "b");
  ASSERT_TRUE(lin.bf16());
  const Tensor x32 = rand(Shape{N, K}), x = Tensor::empty(b, Shape{N, K}, DType::BF16);
  convert(s, x, x32);
  const Tensor y = Tensor::empty(b, Shape{N, M}, DType::BF16);
  lin.forward(s, y, x);
  const std::vector<float> xv = to_vector_f32(x32), wv = to_vector_f32(t.get("w").value), bv = to_vector_f32(t.get("b").value);
  const std::vector<float> yv = to_vector_f32(y);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(round_bf16_host(xv[size_t(n * K + k)])) * double(round_bf16_host(wv[size_t(m * K + k)]));
      const float want = round_bf16_host(float(acc + double(round_bf16_host(bv[size_t(m)]))));
      // f32 accumulation against the f64 reference: the rounded results may differ by one bf16 step
      EXPECT_NEAR(yv[size_t(n * M + m)], want, std::fabs(want) * 0x1p-7 + 1e-6) << n << "," << m;
    }
  EXPECT_EQ(not_bf16(yv), 0u) << "Linear outputs that are not bf16 values";

  // Norm: a bf16 output, mean/rstd f32.
  const Norm norm = Norm::bind(t, NormKind::LayerNorm, 1e-5f, "nw", "nb");
  const Tensor out = Tensor::empty(b, Shape{N, K}, DType::BF16), mean = Tensor::empty(b, Shape{N}),
               rstd = Tensor::empty(b, Shape{N});
  norm.forward(s, out, mean, rstd, x);
  EXPECT_GT(not_bf16(to_vector_f32(mean)) + not_bf16(to_vector_f32(rstd)), 0u) << "the statistics were rounded";
  // The same norm on f32 tensors of the same (bf16) input values gives the unrounded
  // output, whose rounding is the bf16 one.
  const Tensor xr = Tensor::empty(b, Shape{N, K}), out32 = Tensor::empty(b, Shape{N, K});
  convert(s, xr, x);
  norm.forward(s, out32, mean, rstd, xr);
  const std::vector<float> o32 = to_vector_f32(out32), o16 = to_vector_f32(out);
  EXPECT_GT(not_bf16(o32), 0u);
  for (size_t i = 0; i < o32.size(); ++i) ASSERT_EQ(o16[i], round_bf16_host(o32[i])) << i;
}

TEST(MixedPrecision, ModelActivationsAreBf16AndTheLossAndGradientsF32) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  auto tp = test::self_comm("tp"), dp = test::self_comm("dp"), self = test::self_comm("self");
  const VlmConfig c = bf16_config(kImages / kM);
  VlmModel model(c, b, *tp, *self);
  model.init(4);
  model.refresh_working_weights();
  sched::StreamSet streams(b);
  const std::vector<bool> all(kNumModules, true);
  DpGrads dpg(model.modules(), all, *dp, 0, 25, b);
  const GlobalBatch g = make_batch(13, c);
  const std::vector<MicroBatch> mbs = shard(g, c, 1, 0, kM);
  // Each micro-batch alone, then both accumulated (kM = 2 micro-batches of one step).
  std::vector<double> sum;
  for (int m = 0; m < kM; ++m) {
    VlmStep one(model, streams, dpg, all, 1, StepOptions{});
    model.zero_grads();
    one.run({mbs[size_t(m)]});
    const std::vector<float> gm = all_grads(model);
    if (sum.empty()) sum.assign(gm.size(), 0.0);
    for (size_t i = 0; i < gm.size(); ++i) sum[i] += gm[i];
  }
  // The activations are bf16 tensors: the backbone's (its logits, recomputed from the
  // final norm's bf16 output), the projector's; the encoder's features are its bf16 last
  // hidden state in f32 (the relevance stage's input).
  EXPECT_EQ(model.llm().activation_dtype(), DType::BF16);
  EXPECT_EQ(model.projector().activation_dtype(), DType::BF16);
  const std::vector<float> logits = to_vector_f32(model.llm().gather_logits(b.default_stream()));
  EXPECT_GT(logits.size(), 0u);
  EXPECT_EQ(not_bf16(logits), 0u) << "logits that are not bf16 values";
  EXPECT_EQ(model.vision().features().dtype(), DType::F32);
  EXPECT_EQ(not_bf16(to_vector_f32(model.vision().features())), 0u) << "encoder features that are not bf16 values";
  EXPECT_GT(not_bf16(to_vector_f32(model.llm().losses())), 0u) << "the per-token losses were rounded (f32 loss)";

  VlmStep both(model, streams, dpg, all, kM, StepOptions{});
  model.zero_grads();
  both.run(mbs);
  const std::vector<float> acc = all_grads(model);
  ASSERT_EQ(acc.size(), sum.size());
  EXPECT_GT(not_bf16(acc), acc.size() / 2) << "the gradients look bf16-rounded";
  double scale = 0, err = 0;
  for (size_t i = 0; i < acc.size(); ++i) {
    scale = std::max(scale, std::fabs(sum[i]));
    err = std::max(err, std::fabs(double(acc[i]) - sum[i]));
  }
  EXPECT_LE(err, 1e-6 * scale) << "accumulated gradients vs the sum of the micro-batches' (scale " << scale << ")";
}

// The model's activation arenas (encoder, projector, backbone) in bf16 against fp32 for
// the same shapes: at most 55% (activations 2 bytes, the statistics and the encoder's
// f32 features 4).
TEST(MixedPrecision, ActivationArenasAreAtMost55PercentOfFp32) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank";
  Backend& b = cpu_backend();
  auto tp = test::self_comm("tp"), self = test::self_comm("self");
  VlmConfig c = tiny_config(kImages);
  const VlmModel f32(c, b, *tp, *self);
  c.precision = Precision::BF16;
  const VlmModel b16(c, b, *tp, *self);
  const double ratio = double(b16.activation_bytes()) / double(f32.activation_bytes());
  std::printf("tiny VLM activation arenas: %lld B bf16 / %lld B fp32 = %.3f\n", (long long)b16.activation_bytes(),
              (long long)f32.activation_bytes(), ratio);
  EXPECT_LE(ratio, 0.55);
  EXPECT_GE(ratio, 0.5);
}

}  // namespace
}  // namespace vlm

// The model FLOPs of the MFU (model/work.h model_work's model_flops, train/mfu.h)
// against an independent count: every weight matrix of the real model's parameter tables
// (a VlmModel built at TP = 1) times the rows it multiplies, 2 FLOPs per multiply-add, per
// pass (forward; input gradient when something upstream trains; weight gradient when the
// module trains; docs/training.md, "The optimizer"), plus attention (QK^T and PV, the
// backbone's causal half of the square). The convolutional stem's weights are counted at each output
// position of their maps. Lookup tables (token, position, level embeddings) and vectors
// are not products. Both sides count the same products by different routes (shapes read
// from the tables here, closed formulas there), so they agree to double rounding: 1e-12.
// Also: model FLOPs do not depend on the layout (tp x model_flops at tp = 2 equals tp = 1,
// under every placement and with sequence parallelism); the peak of the MFU by device
// name and option; the shape of a step from its micro-batches.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/error.h"
#include "core/backend.h"
#include "scorers/placement/placement.h"
#include "tests/support/mpi.h"
#include "train/mfu.h"

namespace vlm {
namespace {

bool has(const std::string& s, const char* x) { return s.find(x) != std::string::npos; }

VlmConfig tiny(ModelFamily family) {
  VlmConfig c;
  c.vision.image_size = 16, c.vision.patch = 4, c.vision.d_model = 16, c.vision.n_layers = 2;
  c.vision.n_heads = 2, c.vision.d_ff = 32;
  c.scorers.lod.region = 2, c.scorers.lod.min_tokens = 4, c.scorers.lod.max_tokens = 10;
  c.scorers.scorers.hidden = 8;
  c.llm.family = family, c.llm.vocab_size = 300, c.llm.d_model = 32, c.llm.n_layers = 2;
  c.llm.n_heads = 4, c.llm.n_kv_heads = family == ModelFamily::Llama ? 2 : 0, c.llm.d_ff = 64;
  c.llm.tied_embeddings = family != ModelFamily::Llama;
  c.max_images = 8, c.max_text = 24;
  return c;
}

// The independent count (above) of one micro-batch: B images of v visual tokens and
// samples of t text tokens (v, t: means, as the MFU's shape has them).
double reference_flops(const VlmConfig& c, double B, double v, double t) {
  Backend& b = cpu_backend();
  auto tp = test::self_comm("tp"), self = test::self_comm("self");
  VlmModel model(c, b, *tp, *self);
  auto trains = [&](ModuleId m) { return !c.frozen[size_t(m)]; };
  const double n = v + t, G2 = double(c.vision.tokens()), S = c.vision.image_size;
  double total = 0;
  for (const ModuleParams& mod : model.modules())
    for (const Param& p : mod.table->params()) {
      const std::string& name = p.spec.name;
      const Shape& w = p.spec.hf;  // unpadded (the vocabulary's padding rows are no part of the model)
      const double numel = double(w.numel());
      if (w.ndim() < 2) continue;  // biases, norms, the default query
      switch (mod.id) {
        case ModuleId::Llm: {
          if (has(name, "embed_positions")) continue;  // a lookup
          if (has(name, "embed_tokens") && !c.llm.tied_embeddings) continue;  // a lookup; the head is lm_head
          total += 2 * numel * B * n * (trains(ModuleId::Llm) ? 3 : 2);        // every token; tied: the head
          if (has(name, "q_proj"))  // per sample QK^T and PV, causal (half of n^2), 3 passes
            total += 3 * B * 2 * 2 * double(w[0]) * n * n / 2;
          break;
        }
        case ModuleId::Projector: total += 2 * numel * B * v * (trains(ModuleId::Projector) ? 3 : 2); break;
        case ModuleId::Scorers: {
          if (has(name, "scorers.lod.")) continue;  // level and position tables
          const double rows = has(name, ".wq") || has(name, "balancer") ? B : B * G2;
          total += 2 * numel * rows * (trains(ModuleId::Scorers) ? 3 : trains(ModuleId::Vision) ? 2 : 1);
          break;
        }
        case ModuleId::Vision: {
          if (has(name, "position_embedding")) continue;  // added, not multiplied
          const bool tr = trains(ModuleId::Vision);
          if (has(name, "embeddings.stem.")) {  // layer l: a 3x3 stride-2 conv, (S >> (l+1))^2 outputs per image
            const int l = std::stoi(name.substr(name.find("stem.") + 5));
            const double side = double(int64_t(S) >> (l + 1));
            total += 2 * numel * B * side * side * (tr ? (l == 0 ? 2 : 3) : 1);  // layer 0: no pixel gradient
          } else if (has(name, "embeddings.")) {  // patch conv (or the stem's 1x1 projection), texture map
            const bool rows_grad = has(name, "patch_embedding") && c.vision.conv_stem > 0;
            total += 2 * numel * B * G2 * (tr ? (rows_grad ? 3 : 2) : 1);
          } else {  // the blocks
            total += 2 * numel * B * G2 * (tr ? 3 : 1);
            if (has(name, "q_proj")) total += (tr ? 3 : 1) * B * 2 * 2 * double(w[0]) * G2 * G2;  // bidirectional
          }
          break;
        }
      }
    }
  return total;
}


StepShape shape(int64_t images, double visual, double text, int M) {
  StepShape s;
  s.images = images, s.visual = visual, s.text = text, s.prompt = 3, s.micro_batches = M;
  return s;
}

void expect_reference(const VlmConfig& c, const std::string& what) {
  const StepShape s = shape(8, 7.25, 11.625, 3);  // fractional means, as a real step gives
  const double got = model_work(c, 1, s).model_flops;
  const double want = s.micro_batches * reference_flops(c, double(s.images), s.visual, s.text);
  EXPECT_NEAR(got / want, 1.0, 1e-12) << what << ": model_work " << got << ", reference " << want;
}

TEST(ModelFlops, LlamaAllTrainable) { expect_reference(tiny(ModelFamily::Llama), "llama, GQA, untied, texture"); }

TEST(ModelFlops, Gpt2TiedWithAConvStem) {
  VlmConfig c = tiny(ModelFamily::GPT2);
  c.vision.conv_stem = 4, c.vision.texture = false;  // 2 stem layers (P = 4): 4 and 8 channels
  c.frozen[size_t(ModuleId::Llm)] = true;
  expect_reference(c, "gpt2, tied, stem, llm frozen");
}

TEST(ModelFlops, FrozenModules) {
  VlmConfig c = tiny(ModelFamily::Llama);
  c.frozen[size_t(ModuleId::Vision)] = c.frozen[size_t(ModuleId::Llm)] = true;  // LLaVA stage 1
  expect_reference(c, "vision and llm frozen");
  c.frozen[size_t(ModuleId::Scorers)] = true;  // the stage's backward does not run
  expect_reference(c, "projector only");
  c = tiny(ModelFamily::Llama);
  c.frozen[size_t(ModuleId::Scorers)] = c.frozen[size_t(ModuleId::Projector)] = true;
  expect_reference(c, "scorers and projector frozen (input gradients only)");
}

// The model FLOPs of a TP group do not depend on how it is split: tp x (model FLOPs per
// rank at tp = 2) = model FLOPs at tp = 1, whatever the placement, with sequence
// parallelism (its padding rows are no model work) and recomputation (none either).
// The executed FLOPs, which count the replicated encoder on every rank, are larger.
TEST(ModelFlops, IndependentOfTheLayout) {
  VlmConfig c = tiny(ModelFamily::Llama);
  const StepShape s = shape(8, 7.25, 11.625, 2);
  const ModelWork w1 = model_work(c, 1, s);
  for (const std::string& pl : placement_names())
    for (bool sp : {false, true}) {
      VlmConfig d = c;
      d.scorers.scorers.placement = pl, d.llm.sequence_parallel = sp, d.llm.recompute = Recompute::Full;
      const ModelWork w2 = model_work(d, 2, s);
      EXPECT_NEAR(2 * w2.model_flops / w1.model_flops, 1.0, 1e-12) << pl << " sp " << sp;
      EXPECT_GT(2 * w2.gemm_flops, w1.gemm_flops) << "replicated work and recomputation run on every rank";
    }
}

TEST(Mfu, PeakByDeviceAndOption) {
  const std::string h100 = "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)";
  EXPECT_EQ(mfu_peak(0, DeviceKind::CUDA, h100, Precision::BF16).flops_s, gpu_spec("h100").bf16_tflops * 1e12);
  EXPECT_EQ(mfu_peak(0, DeviceKind::CUDA, h100, Precision::FP32).flops_s, gpu_spec("h100").fp32_tflops * 1e12);
  EXPECT_EQ(mfu_peak(0, DeviceKind::CUDA, "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)", Precision::BF16).flops_s,
            gpu_spec("h200").bf16_tflops * 1e12);
  EXPECT_EQ(mfu_peak(0, DeviceKind::CUDA, "cuda:1 NVIDIA A100-SXM4-80GB (sm_80, 79.3 GiB)", Precision::BF16).flops_s,
            gpu_spec("a100").bf16_tflops * 1e12);
  EXPECT_EQ(mfu_peak(0, DeviceKind::CUDA, "cuda:0 NVIDIA A100-PCIE-40GB (sm_80, 39.4 GiB)", Precision::FP32).flops_s,
            gpu_spec("a100").fp32_tflops * 1e12);
  for (const char* other : {"cuda:0 NVIDIA H100 PCIe (sm_90, 79.1 GiB)", "cuda:0 NVIDIA H100 NVL (sm_90, 93.1 GiB)",
                            "cuda:0 NVIDIA L40S (sm_89, 44.4 GiB)"}) {
    const MfuPeak p = mfu_peak(0, DeviceKind::CUDA, other, Precision::BF16);
    EXPECT_EQ(p.flops_s, 0.0) << other;
    EXPECT_TRUE(has(p.note, "set train.peak_tflops") && has(p.note, other)) << p.note;
  }
  const MfuPeak cpu = mfu_peak(0, DeviceKind::CPU, "cpu (2 threads)", Precision::FP32);
  EXPECT_EQ(cpu.flops_s, 0.0);
  EXPECT_TRUE(cpu.note.empty()) << "no note on the CPU: " << cpu.note;
  EXPECT_EQ(mfu_peak(0.25, DeviceKind::CPU, "cpu (2 threads)", Precision::FP32).flops_s, 0.25e12);
  EXPECT_EQ(mfu_peak(500, DeviceKind::CUDA, h100, Precision::BF16).flops_s, 500e12) << "the option wins";
}

TEST(Mfu, ShapeOfAStep) {
  MicroBatch a, b;
  a.images = 2, a.prompt = {{1, 5}, {1, 5, 6}}, a.caption = {{7, 8, 9}, {}};  // a padding repeat: no caption
  b.images = 2, b.prompt = {{1}, {1, 5}}, b.caption = {{7}, {7, 8, 9, 10}};
  const StepShape s = step_shape({a, b}, 13, 2);
  EXPECT_EQ(s.micro_batches, 2);
  EXPECT_EQ(s.images, 2);
  EXPECT_DOUBLE_EQ(s.visual, 6.5);
  EXPECT_DOUBLE_EQ(s.text, (5 + 3 + 2 + 6) / 4.0);
  EXPECT_DOUBLE_EQ(s.prompt, (2 + 3 + 1 + 2) / 4.0);
  const VlmConfig c = tiny(ModelFamily::Llama);
  EXPECT_DOUBLE_EQ(step_mfu(c, 1, s, 0.5, 2e9), model_work(c, 1, s).model_flops / 1e9);
}

}  // namespace
}  // namespace vlm

// The work of a step (model/work.h).
#include "model/work.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "llm/flops.h"
#include "scorers/flops.h"
#include "vision/flops.h"

namespace vlm {

int64_t StepShape::backbone_tokens(const VlmConfig& cfg, int tp) const {
  const int64_t T = std::llround(double(images) * (visual + text));
  return cfg.llm.block().seq_parallel(tp) ? (T + tp - 1) / tp * tp : T;
}

StepShape largest_step(const VlmConfig& cfg, int micro_batches) {
  StepShape s;
  const LodConfig& lod = cfg.scorers.lod;
  s.images = cfg.max_images;
  s.visual = lod.fixed_budget > 0 ? lod.fixed_budget : lod.max_tokens;
  s.text = cfg.max_text;
  s.prompt = cfg.max_text - 1;
  s.micro_batches = micro_batches;
  return s;
}

StepShape step_shape(const std::vector<MicroBatch>& mbs, int64_t visual_tokens, int64_t visual_images) {
  VLM_ASSERT(!mbs.empty() && visual_images > 0, "a step of at least one micro-batch with images");
  StepShape s;
  int64_t images = 0, text = 0, prompt = 0;
  for (const MicroBatch& mb : mbs)
    for (int64_t b = 0; b < mb.images; ++b) {
      ++images;
      prompt += int64_t(mb.prompt[size_t(b)].size());
      text += int64_t(mb.prompt[size_t(b)].size() + mb.caption[size_t(b)].size());
    }
  s.micro_batches = int(mbs.size());
  s.images = std::max<int64_t>(1, (images + s.micro_batches / 2) / s.micro_batches);
  s.visual = double(visual_tokens) / double(visual_images);
  s.text = double(text) / double(std::max<int64_t>(1, images));
  s.prompt = double(prompt) / double(std::max<int64_t>(1, images));
  return s;
}

ModelWork model_work(const VlmConfig& cfg, int tp, const StepShape& s) {
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  const bool vtrain = trains(ModuleId::Vision);
  const double B = double(s.images);
  // Passes of the products with weights: the backbone's and the projector's input
  // gradients always run (2), the weight gradients when they train (3); the stage's
  // backward runs when it or the encoder trains (docs/training.md, "The optimizer").
  auto passes = [&](ModuleId id) { return trains(id) ? 3.0 : 2.0; };
  ScorerDims dims;
  dims.G = cfg.vision.grid(), dims.d = cfg.vision.d_model, dims.dq = cfg.llm.d_model;
  Flops f = backbone_flops(cfg.llm, tp, passes(ModuleId::Llm), double(s.backbone_tokens(cfg, tp)), B, s.visual + s.text);
  f += encoder_flops(cfg.vision, tp, B, vtrain);
  f += projector_flops(cfg.vision.d_model, cfg.llm.d_model, tp, B * s.visual, passes(ModuleId::Projector));
  f += stage_flops(cfg.scorers, dims, tp, s.images, trains(ModuleId::Scorers) ? 3 : vtrain ? 2 : 1);
  ModelWork w;
  const double M = s.micro_batches;
  w.gemm_flops = M * f.gemm, w.attention_flops = M * f.attention, w.model_flops = M * f.model;
  return w;
}

}  // namespace vlm

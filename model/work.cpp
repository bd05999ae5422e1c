// The work of a step (model/work.h).
#include "model/work.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "scorers/placement.h"
#include "vision/patch_embed.h"

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

ModelWork model_work(const VlmConfig& cfg, int tp_size, const StepShape& s) {
  ModelWork w;
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  // Passes of a product whose input gradient always runs (plan_time.h): 2, 3 when it trains.
  auto passes = [&](ModuleId id) { return trains(id) ? 3.0 : 2.0; };
  const double tp = tp_size, M = s.micro_batches, B = double(s.images);
  // Backbone (TP-split), per token: per layer q, o (NH heads), k, v (NKV heads) and the MLP;
  // the output layer. Heads and MLP columns are split over tp; with NKV < tp every rank
  // projects the one KV head it uses (nn/attention.h), which is replicated work.
  const ModelConfig& m = cfg.llm;
  const double C = double(m.d_model), L = m.n_layers, HS = double(m.head_dim()), NH = m.n_heads;
  const double NKV = m.kv_heads(), F = double(m.d_ff);
  const double q_o = 2 * 2 * C * NH * HS, kv = 2 * 2 * C * NKV * HS, mlp = (m.is_llama() ? 3 : 2) * 2 * C * F;
  const double layer_run = (q_o + mlp) / tp + (NKV >= tp ? kv / tp : kv / NKV), layer_model = (q_o + kv + mlp) / tp;
  const double head_run = 2 * C * double(m.padded_vocab(tp_size)) / tp, head_model = 2 * C * double(m.vocab_size) / tp;
  const double n = s.visual + s.text, T_run = double(s.backbone_tokens(cfg, tp_size)), T_model = B * n;
  const double llm_mm_run = T_run * (L * layer_run + head_run), llm_mm_model = T_model * (L * layer_model + head_model);
  const double attn = B * L * 2 * n * n * NH * HS / tp;  // causal: half of QK^T and PV's 2 x 2 n^2 NH HS
  const double re_mm = m.recompute == Recompute::Full ? T_run * L * layer_run : 0;
  const double re_attn = m.recompute == Recompute::None ? 0 : attn;
  // Encoder (replicated: every TP rank encodes every image, under every placement:
  // docs/training.md, "The model"; backward only when it trains): the embedding's own
  // count (vision/patch_embed.h: the patch convolution or the stem, the texture map), the
  // blocks.
  const VisionConfig& v = cfg.vision;
  const PatchEmbed embed(v);
  const bool vtrain = trains(ModuleId::Vision);
  const double N = double(v.tokens()), dv = double(v.d_model), Fv = double(v.d_ff), Lv = v.n_layers;
  const double blocks = Lv * N * 2 * (4 * dv * dv + 2 * dv * Fv), vattn_fwd = Lv * 4 * N * N * dv;  // per image
  const double venc = B * (2 * embed.forward_macs_per_image() + (vtrain ? 3 : 1) * blocks +
                           (vtrain ? 2 * embed.backward_macs_per_image() : 0));
  const double vattn = B * (vtrain ? 3 : 1) * vattn_fwd;
  // Projector (replicated), every visual token.
  const double proj = B * s.visual * 2 * (dv * C + C * C) * passes(ModuleId::Projector);
  // Scorers per image (scorers/scorer.h): propositional and perspectival w1f, w1t, w2 and
  // participatory wf per cell, its wq per image; the balancer's v1s, v1q, v2 per image
  // (scorers/balancer.h), on every rank. Their backward runs when they or the encoder train.
  const double h = double(cfg.scorers.scorers.hidden), tex = double(kTextureChannels);
  const double scorers = 2 * (N * (2 * h * (dv + tex + 1) + h * dv) + h * C), balancer = 2 * h * (9 + C + 3);
  const double spass = trains(ModuleId::Scorers) ? 3 : vtrain ? 2 : 1;
  const Placement pl = cfg.scorers.scorers.placement;
  const double share = pl == Placement::BatchSplit ? double(batch_split_slots(s.images, tp_size)) / B
                       : pl == Placement::Dedicated ? std::ceil(3.0 / tp) / 3
                       : pl == Placement::Tp2       ? 0.5  // each scorer's hidden width split over the pair
                                                    : 1.0;
  const double stage_run = B * (share * scorers + balancer) * spass, stage_model = B * (scorers + balancer) * spass;
  const double llm_passes = passes(ModuleId::Llm);
  w.gemm_flops = M * (llm_passes * llm_mm_run + re_mm + venc + proj + stage_run);
  w.attention_flops = M * (3 * attn + re_attn + vattn);
  w.model_flops = M * (llm_passes * llm_mm_model + 3 * attn + (venc + vattn + proj + stage_model) / tp);
  return w;
}

}  // namespace vlm

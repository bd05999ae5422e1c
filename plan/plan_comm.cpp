// Bytes per step per group (plan/plan_comm.h).
#include "plan/plan_comm.h"

#include <cmath>

#include "base/error.h"
#include "llm/comm_bytes.h"
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

void add(CommCounters& c, CollKind k, int64_t bytes) {
  VLM_ASSERT(bytes >= 0, "negative byte count");
  c.bytes[size_t(k)] += uint64_t(bytes);
}

void add(CommCounters& c, const CommCounters& more) {
  for (size_t k = 0; k < c.bytes.size(); ++k) c.bytes[k] += more.bytes[k];
}

void add(CommCounters& c, const PlacementBytes& b, int64_t times) {
  add(c, CollKind::AllGather, times * int64_t(b.all_gather));
  add(c, CollKind::AllReduce, times * int64_t(b.all_reduce));
  add(c, CollKind::Broadcast, times * int64_t(b.broadcast));
}

}  // namespace

StepBytes step_bytes(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s) {
  StepBytes out;
  const ModelConfig& m = cfg.llm;
  const int64_t M = s.micro_batches, C = m.d_model;
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  // Element sizes on the wire (docs/training.md, "Numerics"): the backbone's activations cross the TP
  // regions in the activations' dtype (the embedding's output included), its statistics
  // and the prompt lookup in f32; the DP reduction in train.grad_reduce_dtype, ZeRO's
  // all-gathers in the compute dtype.
  const int64_t act = cfg.precision == Precision::BF16 ? 2 : 4, grad = int64_t(dtype_size(l.grad_wire));
  CommCounters& t = out.tp;
  if (l.tp > 1) {
    // Per micro-batch the prompt query (f32); the backbone's (llm/comm_bytes.h).
    const int64_t P = std::llround(double(s.images) * s.prompt);
    if (P > 0) add(t, CollKind::AllReduce, M * 4 * P * C);
    // ZeRO >= 2 all-reduces a layer's TP-partial gradients after each micro-batch's
    // backward of it, before its DP reduce-scatter (train/step.h).
    add(t, backbone_tp_bytes(m, l.tp, s.backbone_tokens(cfg, l.tp), act, M, trains(ModuleId::Llm),
                             l.dp > 1 && l.zero >= 2 ? M : 1));
    // The scorer placement (scorers/placement/placement.h) on its group, which is the TP
    // group (tp2's pair is the TP group in the VLM: resolve_vlm_config), f32: per
    // micro-batch its forward, its backward when the stage's runs (the scorers or the
    // encoder train) and the encoder's feature gradients when the encoder trains.
    ScorerDims dims;
    dims.G = cfg.vision.grid(), dims.d = cfg.vision.d_model, dims.dq = C;
    const std::unique_ptr<ScorerPlacement> pl = make_placement(cfg.scorers.scorers.placement, l.tp);
    PlacementBytes mb = pl->forward_bytes(s.images, dims, 4);
    if (trains(ModuleId::Scorers) || trains(ModuleId::Vision)) mb += pl->backward_bytes(s.images, dims, 4);
    if (trains(ModuleId::Vision)) mb += pl->feature_grad_bytes(s.images, dims, 4);
    add(t, mb, M);
    // Once per step: the scorers' parameter gradients (the placement's P term).
    if (trains(ModuleId::Scorers)) add(t, pl->finalize_bytes(r.scorer_params, 4), 1);
  }
  add(t, CollKind::AllReduce, 4);  // the gradient norm's TP-split sum of squares (every group size)

  // DP (optim/dp_grads.h, nn/param_layout.h): per run of every table's layout.
  CommCounters& d = out.dp;
  add(d, CollKind::AllReduce, 8 + 64);  // the trainer's host reductions (f64)
  const int Z = l.dp > 1 ? l.zero : 0;
  for (size_t i = 0; i < r.layouts.size() && l.dp > 1; ++i) {
    const ParamLayout& lay = r.layouts[i];
    // The encoder runs its pooled blocks itself: every use gathered (its backward only
    // when it trains), traffic apart from the backbone's layers.
    const bool encoder = i == size_t(ModuleId::Vision);
    if (Z == 0) {
      if (r.trains[i]) add(d, CollKind::AllReduce, grad * lay.numel());
      continue;
    }
    for (const ShardRun& run : lay.runs()) {
      const int64_t blk = run.block(), tail = run.tail(), compute = run.bf16 ? 2 : 4;
      // Reductions: once per step, or per micro-batch for a pooled unit's (zero >= 2).
      const int64_t reductions = r.trains[i] ? (run.pooled ? M : 1) : 0;
      CommCounters* part = !run.pooled ? nullptr : encoder ? &out.dp_vision : &out.dp_layer_reduce;
      for (CommCounters* c : {&d, part}) {
        if (!c) continue;
        if (blk > 0) add(*c, CollKind::ReduceScatter, reductions * grad * (run.tail_begin - run.begin));
        if (tail > 0) add(*c, CollKind::AllReduce, reductions * grad * tail);
      }
      // All-gathers: after the update (the resident compute copies), or at zero 3 before
      // every use of a pooled unit: its forward and its backward per micro-batch, but the
      // backbone's top layer's backward (its weights are still in their slot).
      const bool per_use = Z >= 3 && run.pooled;
      auto uses = [&] { return encoder ? (r.trains[i] ? 2 * M : M) : run.unit == lay.pooled_units().back() ? M : 2 * M; };
      const int64_t gathers = per_use ? uses() : r.trains[i] ? 1 : 0;
      if (blk > 0) {
        add(d, CollKind::AllGather, gathers * compute * blk);
        add(!per_use ? out.dp_update : encoder ? out.dp_vision : out.dp_layer_gather, CollKind::AllGather,
            gathers * compute * blk);
      }
    }
  }
  if (Z >= 1) add(d, CollKind::AllReduce, 8);  // the norm's two sums, over DP
  return out;
}

}  // namespace vlm

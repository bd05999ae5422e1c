// Bytes per step per group (plan/plan_comm.h).
#include "plan/plan_comm.h"

#include <cmath>

#include "base/error.h"
#include "scorers/placement.h"

namespace vlm {

namespace {

void add(CommCounters& c, CollKind k, int64_t bytes) {
  VLM_ASSERT(bytes >= 0, "negative byte count");
  c.bytes[size_t(k)] += uint64_t(bytes);
}

}  // namespace

StepBytes step_bytes(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s) {
  StepBytes out;
  const ModelConfig& m = cfg.llm;
  const int64_t tp = l.tp, M = s.micro_batches, C = m.d_model, L = m.n_layers, HS = m.head_dim(), NKV = m.kv_heads();
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  // Element sizes on the wire (docs/training.md, "Numerics"): the backbone's activations cross the TP
  // regions in the compute precision, its statistics, the embedding and the prompt lookup
  // in f32; the DP
  // reduction in train.grad_reduce_dtype, ZeRO-1's all-gather of the values in f32.
  const int64_t act = cfg.precision == Precision::BF16 ? 2 : 4, grad = int64_t(dtype_size(l.grad_wire));
  CommCounters& t = out.tp;
  if (tp > 1) {
    const int64_t T = s.backbone_tokens(cfg, l.tp), Ts = T / tp, P = std::llround(double(s.images) * s.prompt);
    const bool sp = m.block().seq_parallel(l.tp), full = m.recompute == Recompute::Full;
    // Per micro-batch: the prompt query, the backbone forward + backward (llm/backbone.h,
    // E = 1), the placement's forward and backward.
    if (P > 0) add(t, CollKind::AllReduce, M * 4 * P * C);
    // E + 4L + 1 (+ 2L recomputed forwards); the embedding's (E) in f32, the others in act.
    const int64_t blocks = 4 * L + 1 + (full ? 2 * L : 0), wire = 4 + act * blocks;
    if (!sp) {
      add(t, CollKind::AllReduce, M * (wire * T * C + 4 * 3 * T));
    } else {
      add(t, CollKind::ReduceScatter, M * wire * T * C);
      add(t, CollKind::AllGather, M * wire * Ts * C);
      add(t, CollKind::AllReduce, M * 4 * 3 * T);
    }
    ScorerDims dims;
    dims.G = cfg.vision.grid(), dims.d = cfg.vision.d_model, dims.dq = C;
    const Placement pl = cfg.scorers.scorers.placement;
    const PlacementBytes mb = placement_bytes(pl, l.tp, s.images, dims, 0, 4);
    // The stage's backward (its all-reduces) runs when the scorers or the encoder train.
    const bool stage_bwd = trains(ModuleId::Scorers) || trains(ModuleId::Vision);
    add(t, CollKind::AllGather, M * int64_t(mb.all_gather));
    add(t, CollKind::Broadcast, M * int64_t(mb.broadcast));
    if (stage_bwd) add(t, CollKind::AllReduce, M * int64_t(mb.all_reduce));
    // Batch-split with a training encoder: the feature gradients of every rank's images
    // summed over TP (model/vlm_model.cpp), [B*G*G, d_v] f32 per micro-batch.
    if (pl == Placement::BatchSplit && trains(ModuleId::Vision))
      add(t, CollKind::AllReduce, M * 4 * s.images * dims.G * dims.G * dims.d);
    // Once per step: the TP-partial gradients of the backbone (R, and S under SP) and the
    // scorers' parameter gradients (the placement's P term).
    if (trains(ModuleId::Llm)) {
      const int64_t R = NKV < tp ? L * (2 * NKV * HS * C + (m.has_qkv_bias() ? 2 * NKV * HS : 0)) : 0;
      const int64_t S = !sp ? 0 : m.is_llama() ? L * 2 * C + C : L * 6 * C + 2 * C + m.max_pos * C;
      add(t, CollKind::AllReduce, 4 * (R + S));
    }
    if (trains(ModuleId::Scorers)) {
      const PlacementBytes all = placement_bytes(pl, l.tp, s.images, dims, r.scorer_params, 4);
      add(t, CollKind::AllReduce, int64_t(all.all_reduce - mb.all_reduce));
      add(t, CollKind::Broadcast, int64_t(all.broadcast - mb.broadcast));
    }
  }
  add(t, CollKind::AllReduce, 4);  // the gradient norm's TP-split sum of squares (every group size)

  CommCounters& d = out.dp;
  add(d, CollKind::AllReduce, 8 + 32);  // the trainer's host reductions (f64)
  const bool zero = l.zero > 0 && l.dp > 1;
  for (size_t i = 0; i < r.owned.size(); ++i) {
    if (r.grad_elems[i] == 0) continue;  // frozen
    if (!zero) {
      if (l.dp > 1) add(d, CollKind::AllReduce, grad * r.grad_elems[i]);
      continue;
    }
    const DpGrads::Owned& o = r.owned[i];
    const int64_t blk = o.end - o.begin, tail = o.tail_end - o.tail_begin;
    if (blk > 0) add(d, CollKind::ReduceScatter, grad * o.tail_begin), add(d, CollKind::AllGather, 4 * blk);
    if (tail > 0) add(d, CollKind::AllReduce, grad * tail);
  }
  if (zero) add(d, CollKind::AllReduce, 8);  // the norm's two sums, over DP
  return out;
}

}  // namespace vlm

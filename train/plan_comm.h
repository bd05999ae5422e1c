// The bytes one optimizer step of `vlm train` moves on each group, as the Communicator
// counts them (bytes of the local input buffer of every call: parallel/communicator.h),
// from the formulas the module tests assert:
//   backbone (llm/backbone.h, mixed input: E = 1), the prompt query's vocab-parallel
//   lookup (one all-reduce of the prompt rows [P, C]), the scorer placement
//   (scorers/placement.h: placement_bytes, its parameter part once per step; under
//   batch-split with a training encoder also the feature gradients' all-reduce), the DP
//   reduction (train/dp_grads.h: all-reduce of every trainable gradient arena, or
//   ZeRO-1's reduce-scatter + tail all-reduce + the values' all-gather), the optimizer's
//   norm (train/optimizer.h: 4 bytes on TP, and 8 on DP under ZeRO-1) and the trainer's
//   two host reductions over DP per step (the counted tokens, 8 bytes; the loss, tokens,
//   visual tokens and images, 32 bytes).
// The step's shape decides the activation-sized terms; largest_step is the shape the
// arenas are planned for, so its bytes are what the largest step moves.
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "train/plan_memory.h"

namespace vlm {

// The token counts are means: whole numbers for the largest step, the means of the
// step's images and samples for a step that ran (train/mfu.h step_shape).
struct StepShape {
  int64_t images = 1;  // per micro-batch (train.batch)
  double visual = 1;   // visual tokens per image
  double text = 1;     // prompt + caption tokens per sample
  double prompt = 1;   // of which prompt tokens (BOS + instruction)
  int micro_batches = 1;
  // Backbone tokens of one micro-batch: images * (visual + text) (rounded to a whole
  // number), padded to a multiple of tp under sequence parallelism (train/vlm_model.cpp
  // pack_input).
  int64_t backbone_tokens(const VlmConfig& cfg, int tp) const;
};

// Every image at its largest token count (lod.budget when fixed, else lod.max_tokens),
// every sample at train.max_text tokens of which max_text - 1 prompt tokens (the most a
// prompt keeps: train/batch.h).
StepShape largest_step(const VlmConfig& cfg, int micro_batches);

struct StepBytes {
  CommCounters tp, dp;  // bytes only (calls are not modelled)
};

// One step's bytes on the TP and DP groups of a rank planned by plan_rank.
StepBytes step_bytes(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s);

}  // namespace vlm

// The bytes one optimizer step of `vlm train` moves on each group, as the Communicator
// counts them (bytes of the local input buffer of every call: parallel/communicator.h),
// the sum of what each module states for the step's shape, from the formulas the module
// tests assert: the backbone (llm/comm_bytes.h, the mixed input: E = 1), the prompt
// query's vocab-parallel lookup (one all-reduce of the prompt rows [P, C]), the scorer
// placement (scorers/placement/placement.h: its forward, backward and feature-gradient
// bytes per micro-batch, its parameter part once per step), the DP reduction
// (optim/dp_grads.h: all-reduce of every trainable gradient space at zero 0; under
// ZeRO, per run of the layout (nn/param_layout.h), reduce-scatter + tail all-reduce in
// train.grad_reduce_dtype, once per step or per micro-batch for the pooled layers (zero
// >= 2), and all-gathers of the blocks in the compute dtype, after the update or, at zero
// 3, before every use of a pooled layer), the optimizer's norm (optim/optimizer.h: 4
// bytes on TP, and 8 on DP under ZeRO) and the trainer's two host reductions over DP per
// step (the counted tokens, 8 bytes; the loss, tokens, visual tokens, images and the
// four relevance-precision sums of train/lod_metrics.h, 64 bytes).
// The step's shape decides the activation-sized terms; largest_step (model/work.h) is the
// shape the arenas are planned for, so its bytes are what the largest step moves.
#pragma once
#include <cstdint>

#include "model/work.h"
#include "parallel/communicator.h"
#include "train/memory_terms.h"

namespace vlm {

struct StepBytes {
  CommCounters tp, dp;  // bytes only (calls are not modelled)
  // Parts of dp the time model places differently (plan/plan_time.h): the all-gathers
  // after the optimizer's update (ZeRO >= 1), the backbone's pooled layers' per-micro-
  // batch reduce-scatters (zero >= 2) and all-gathers (zero 3), and the encoder's
  // (dp_vision: inside its own tasks, over DP's duplicate communicator, train/step.h).
  CommCounters dp_update, dp_layer_reduce, dp_layer_gather, dp_vision;
};

// One step's bytes on the TP and DP groups of a rank planned by plan_rank.
StepBytes step_bytes(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s);

}  // namespace vlm

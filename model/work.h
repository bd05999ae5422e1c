// The work of the assembled model for a step's shape: the shape itself (images, visual
// and text tokens per micro-batch) and the FLOPs each product runs. The planner adds its
// memory traffic and communication to these (plan/plan_time.h); the MFU of `vlm train`
// divides model_flops by the step time (train/mfu.h).
#pragma once
#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/vlm_model.h"

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
  // number), padded to a multiple of tp under sequence parallelism (model/vlm_model.cpp
  // pack_input).
  int64_t backbone_tokens(const VlmConfig& cfg, int tp) const;
};

// Every image at its largest token count (lod.budget when fixed, else lod.max_tokens),
// every sample at train.max_text tokens of which max_text - 1 prompt tokens (the most a
// prompt keeps: model/batch.h).
StepShape largest_step(const VlmConfig& cfg, int micro_batches);

// The shape of a step as it ran: images per micro-batch and text tokens (prompt +
// caption) per sample are the means over `mbs`; visual tokens per image are
// visual_tokens / visual_images (the trainer's: the step's micro-batches,
// VlmStep::visual_tokens).
StepShape step_shape(const std::vector<MicroBatch>& mbs, int64_t visual_tokens, int64_t visual_images);

// The FLOPs of one step on one rank of a TP group of size tp: the sum of what each module
// counts for its shape (nn/flops.h: 2 FLOPs per multiply-add of the matmuls of the layers
// with weights and of attention): the backbone (llm/flops.h), the encoder and the
// projector (vision/flops.h), the relevance stage as placed (scorers/flops.h). Per
// product: forward 1x, the input gradient 1x when something upstream trains, the weight
// gradient 1x when the module trains (the step skips the others: docs/training.md,
// "The optimizer").
struct ModelWork {
  // What this rank executes (the time model): the replicated parts (encoder, projector,
  // scorers as placed, balancer) in full, recomputation, the vocabulary's padding columns.
  double gemm_flops = 0, attention_flops = 0;  // matmuls of the layers / of attention
  // Model FLOPs (MFU): the FLOPs of the TP group's step divided by tp, each product
  // counted once: no recomputation, no replicated work (the encoder every TP rank runs
  // counts once per group), no padding (vocabulary, sequence parallelism).
  double model_flops = 0;
};
ModelWork model_work(const VlmConfig& cfg, int tp, const StepShape& s);

}  // namespace vlm

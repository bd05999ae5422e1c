// What reaches the relevance scorers during training (docs/scorers.md, "Measuring what
// the scorers learn"), measured after each optimizer step and logged by the trainer to
// metrics.jsonl / TensorBoard (train group):
//  - relevance_precision, relevance_precision_chance: the relevance precision
//    (scorers/relevance_precision.h) of the step's last micro-batch against its caption
//    boxes (datasets with boxes only); measure_lod_step gives this rank's sums, which the
//    trainer adds over DP in the step's own host reduction (no collective of its own);
//  - scorer_grad_norm: the L2 norm of the gradient of the parameters that learn only
//    through the relevance r (the three scorers, the balancer and the default query:
//    every "scorers.*" parameter but the LOD embeddings "scorers.lod.*"), after the step's
//    gradient reduction, before clipping (the whole gradient's norm is grad_norm); with
//    train.zero at dp > 1 only this rank's block of the arena is reduced, so the figure
//    mixes reduced and local parts (exact at dp = 1, as in `vlm ablate` on one process);
//    under scorers.placement=tp2 it is this rank's shard of the split scorers';
//  - lod_explore, lod_budget: the step's LOD training schedule (LodConfig::step_at; budget
//    0 = the configured rule).
#pragma once
#include <vector>

#include "data/load/loader.h"
#include "model/vlm_model.h"
#include "scorers/relevance_precision.h"

namespace vlm {

struct LodStepMetrics {
  RelevancePrecision precision;  // boxed = 0 when the batch has no boxes
  double scorer_grad_norm = 0;
};

// After the step: `last` is the batch of the step's last micro-batch (the model's current
// stage). This rank's figures; no communication.
LodStepMetrics measure_lod_step(VlmModel& model, Stream& s, const Batch& last);

}  // namespace vlm

// The device memory of one rank of `vlm train`, term by term (docs/planning.md), read
// from the rank's constructed objects: the trainer's own, or the planner's, which builds
// the same objects without memory (plan_rank below).
//
// MemoryTerms is the one place where the terms are named: a new kind of device memory
// (for instance low-precision copies of the weights) becomes one field here, filled in
// memory_terms; `buffers` takes whatever is not named yet, so total() stays exact.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "base/memory_check.h"  // format_bytes
#include "model/vlm_model.h"
#include "optim/dp_grads.h"
#include "optim/optimizer.h"

namespace vlm {

struct MemoryTerms {
  size_t params = 0;       // f32 parameter storage of the four modules: the resident values
                           // (every master at zero 0) and this rank's shards of the rest
                           // (nn/param_table.h)
  size_t bf16_copies = 0;  // their resident bf16 working copies (train.precision=bf16;
                           // docs/training.md, "Numerics") and the bf16 shards of frozen pooled layers
  size_t gathered = 0;     // zero 3: the two pool slots of gathered layer weights
  size_t grads = 0;        // gradients of the trainable modules (resident, and at zero >= 2
                           // the two pool slots of the layers'; none when frozen), and the
                           // DP reduction's bf16 wire copy and accumulation buffer
  size_t optimizer = 0;    // AdamW moments of the elements this rank owns, and under ZeRO
                           // the reduced gradient shards and the all-gathers' input staging
  size_t activations = 0;  // activation arenas: encoder, projector, backbone (nn/act_plan.h)
  size_t buffers = 0;      // the rest: the model's input and token buffers (images, texture,
                           // prompt rows, visual tokens and their gradients), small tables
  size_t total() const { return params + bf16_copies + gathered + grads + optimizer + activations + buffers; }

  struct Term {
    const char* name;
    size_t bytes;
  };
  std::vector<Term> terms() const;  // in the order above
  Term largest() const;
  // "parameters 1.2 MiB, gradients ..., total N B" (the total exact, in bytes)
  std::string str() const;
};

// The terms of a constructed rank. `allocated`: the bytes its backend counted for the
// model, the DP reduction and the optimizer (their sum; `buffers` is the rest).
MemoryTerms memory_terms(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated);

// A rank of a TP x DP layout.
struct RankLayout {
  int tp = 1, tp_rank = 0, dp = 1, dp_rank = 0;
  int zero = 0;           // train.zero (0..3)
  double bucket_mb = 25;  // train.bucket_mb
  DType grad_wire = DType::F32;  // train.grad_reduce_dtype
};

// One planned rank: its terms and the objects' figures the communication plan needs.
struct RankPlan {
  MemoryTerms memory;
  std::vector<ParamLayout> layouts;  // per model.modules() entry (nn/param_layout.h)
  std::vector<bool> trains;          // per module: not frozen
  int64_t scorer_params = 0;         // RelevanceStage::scorer_param_count (full tensors)
};

// The plan of a constructed rank: the trainer's own objects (train/trainer.cpp), or
// plan_rank's. `allocated` as for memory_terms.
RankPlan rank_plan(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated);

// The planner's rank (`vlm plan`, plan/plan.h; docs/planning.md): the rank's memory
// without a GPU, MPI or the memory itself, exact by construction. It builds the rank's
// objects with the very constructors the trainer runs (VlmModel, DpGrads, AdamW:
// train/trainer.cpp) on a backend that only reserves address space
// (core/reserving_backend.h) and with stand-in communicators of the layout's sizes and
// ranks that never communicate (parallel/stand_in_communicator.h). Every arena is
// therefore planned by the code that plans it in training (ParamTable, nn/act_plan.h,
// the modules' own buffers). The trainer asks it too, to say what the plan predicts
// when an allocation fails. cfg: validated for l.tp (resolve_vlm_config).
RankPlan plan_rank(const VlmConfig& cfg, const RankLayout& l, const OptimOptions& o);

}  // namespace vlm

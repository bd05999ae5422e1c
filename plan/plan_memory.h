// The planner's way of knowing the device memory of one rank of `vlm train`
// (train/memory_terms.h) without a GPU, MPI or the memory itself (docs/planning.md).
//
// Exact by construction: plan_rank builds the rank's objects with the very
// constructors the trainer runs (VlmModel, DpGrads, AdamW: train/trainer.cpp), on a
// backend that only reserves address space (nothing is written but a few small tables)
// and with stand-in communicators of the layout's sizes and ranks that never
// communicate. Every arena is therefore planned by the code that plans it in training
// (ParamTable, nn/act_plan.h, the modules' own buffers), and memory_terms
// (train/memory_terms.h) reads the same figures from either set of objects.
#pragma once
#include "train/memory_terms.h"

namespace vlm {

// The rank's memory without allocating it (above). cfg: validated for l.tp (resolve_vlm_config).
RankPlan plan_rank(const VlmConfig& cfg, const RankLayout& l, const OptimOptions& o);
// The bytes of tensor data each DP rank of TP rank l.tp_rank writes to a checkpoint at
// ZeRO level l.zero (index: the DP rank; l.dp_rank is ignored): the writer's own pieces
// (checkpoint/checkpoint_pieces.h) of the rank's model built as above, so exact.
std::vector<int64_t> plan_checkpoint_bytes(const VlmConfig& cfg, const RankLayout& l);

}  // namespace vlm

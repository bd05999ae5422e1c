// `vlm ablate` (docs/ablations.md): trains and evaluates every combination of scorer
// placement x LOD policy x token budget with the same options, seed and data, in this
// process or under mpirun (every rank runs every row, each row one in-process Trainer,
// train/trainer.h), and writes ablation.csv / .md / .png (ablate/ablate_table.h) into
// ablate.out after each row.
// Invariants:
//  - A row = the base options with lod.policy, lod.budget = lod.max_tokens = the budget
//    (lod.min_tokens lowered to it when above; with lod.anneal, lod.max_tokens is kept
//    when above the budget: the training budget falls from it), scorers.placement, the run seed (one row
//    per --seeds entry; the configuration's seed when none), and the run folder
//    <out>/runs/<placement>-<lod>-<budget>-s<seed>-tp<T>dp<D>; no checkpoints (but the shared
//    prefix's below), no periodic validation, no caption accuracy (the answers are
//    measured by ablate/ablate_eval.h).
//  - Every row is checked before the first one trains (a refused row refuses the whole
//    ablation with one line, exit 2): the names, tp2's even parallel.tp, the budgets
//    against the number of regions and G*G, the dataset's caption boxes, and the model
//    of every row (resolve_vlm_config).
//  - Resume: the rows already in <out>/ablation.csv (same key) are not run again; rows of
//    another configuration (fingerprint: every option but the row's own, the layout, the
//    run folders, logging and the ablate.* lists and check) are refused with one line.
//  - Rows of one placement and seed that share their first steps (lod.anneal_from at full
//    detail, ablate/ablate_prefix.h) train those steps once and resume from them, with
//    the same figures as rows trained from step 1 (ablate.share_prefix = false trains
//    every row from step 1).
//  - Rows equal but for the placement must have equal losses over their first
//    ablate.check_steps steps (check_placements, ablate/ablate_table.h); a
//    mismatch is marked in the table, printed on stderr, and the exit status is 1.
#pragma once
#include "ablate/ablate_options.h"
#include "base/config.h"

namespace vlm {

class Runtime;

// Runs the ablation; returns the exit status (0, or 1 when a placement's losses differ).
int run_ablation(const Config& cfg, Runtime& rt);

}  // namespace vlm

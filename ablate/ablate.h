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
#include <cstdint>
#include <string>
#include <vector>

#include "base/options.h"

namespace vlm {

class Runtime;

struct AblateOptions {
  std::vector<std::string> placements{"replicated"};  // known names, each once
  std::vector<std::string> lods{"relevance", "uniform", "random"};
  std::vector<int64_t> budgets{64, 100, 200, 400};  // checked by run_ablation
  std::vector<int64_t> seeds;  // empty: the configuration's seed (read_ablate_options fills it)
  int64_t steps = 0;          // 0: the configuration's train.steps / train.epochs
  std::string out = "ablation";
  double tol = 1e-5;          // relative tolerance of the placements' equal losses
  int64_t check_steps = 20;   // ... over the first steps (check_placements)
  int64_t eval_samples = 256; // samples of eval.split answered per row (0 = all)
  bool share_prefix = true;   // train the rows' shared full-detail prefix once (ablate/ablate_prefix.h)
  std::string test_break;     // test only: a placement whose rows train differently
};

// The declaration of ablate.* (base/options.h), with the aliases --placements, --lod,
// --budgets, --seeds, --steps, --out.
const OptionSet<AblateOptions>& ablate_options();
// Registers ablate.* and every option of `vlm train`.
void register_ablate_options(Config& cfg);
// Reads ablate.*: the placement and policy lists are checked here (a UserError naming a
// word that is not one, or one given twice); run_ablation reads them on every rank.
AblateOptions read_ablate_options(const Config& cfg);
// Runs the ablation; returns the exit status (0, or 1 when a placement's losses differ).
int run_ablation(const Config& cfg, Runtime& rt);

}  // namespace vlm

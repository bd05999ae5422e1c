// The options of `vlm ablate` (ablate/ablate.h), under ablate.*: which rows to train
// (placements x LOD policies x budgets x seeds), how long, where the files go, and the
// equal-loss check's tolerance (docs/ablations.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/options.h"

namespace vlm {

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

}  // namespace vlm

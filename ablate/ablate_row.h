// One row of `vlm ablate` (ablate/ablate.h): a placement, an LOD policy, a token budget
// and a seed, trained with the base options and the few the row sets over them
// (row_overrides: the policy, the budget, the placement, the seed, its run folder, no
// checkpoints, no periodic validation); and the fingerprint of the options the rows of
// one ablation share, which resuming an ablation.csv checks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ablate/ablate_options.h"
#include "base/config.h"

namespace vlm {

struct RowSpec {
  std::string placement, lod;
  int64_t budget = 0, seed = 0;
};

// The options row r sets (read after the base options, so they win), one
// "name = value" line each; tp and dp name the row's run folder.
std::string row_overrides(const RowSpec& r, const AblateOptions& a, const Config& base, int tp, int dp);

// The base options, then the row's, then `extra` (the shared prefix's, ablate/ablate_prefix.h).
std::unique_ptr<Config> row_config(const Config& base, const std::string& overrides, const std::string& extra = "");

// Every option but those a row, the layout or the bookkeeping set: rows of one ablation
// share it (FNV-1a 64 of the filtered dump, hex). steps: ablate.steps (0: the base's).
std::string fingerprint(const Config& base, int64_t steps);

}  // namespace vlm

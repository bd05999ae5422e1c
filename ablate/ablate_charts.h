// The pictures `vlm ablate` writes beside its table (docs/ablations.md), as PNG bytes
// (picture/line_chart.h): ablation.png, answer accuracy against mean visual tokens per
// image, one line per LOD policy, mean over seeds with error bars of one standard error;
// training.png, the relevance precision of the training batches over the steps.
#pragma once
#include <string>
#include <vector>

#include "ablate/ablate_table.h"

namespace vlm {

// The chart of the rows of one placement and layout (the one with the most rows): the
// summaries' accuracies with error bars of one standard error.
std::string ablation_chart_png(const std::vector<AblationRow>& rows);
// Relevance precision of the training batches over the steps, one line per LOD policy at
// the smallest budget (same placement and layout as ablation_chart_png), and the chance
// level.
std::string training_chart_png(const std::vector<AblationRow>& rows);

}  // namespace vlm

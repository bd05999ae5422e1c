// `vlm ablate`: the scorer-placement x LOD-policy x token-budget ablation (ablate/ablate.h;
// docs/ablations.md). As one process or under mpirun (every rank runs every row):
//   vlm ablate --config configs/scenes.cfg --placements replicated --lod relevance,uniform,random
//              --budgets 64,100,200,400 [--steps N] [--out DIR]
#include "ablate/ablate.h"
#include "apps/command.h"
#include "base/config.h"
#include "parallel/runtime.h"

namespace vlm {

namespace {

int ablate(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  return run_ablation(cfg, rt);
}

}  // namespace

VLM_COMMAND(ablate, {.path = "ablate",
                     .summary = "train and evaluate every scorer placement x LOD policy x token budget (a table and a chart)",
                     .usage = "--config configs/scenes.cfg [--placements replicated,batch-split,dedicated,tp2] "
                              "[--lod relevance,uniform,random] [--budgets 64,100,200,400] [--steps N] [--out DIR]\n"
                              "Every row trains with the same options, seed and data (a scenes dataset: "
                              "vlm data build --data.from scenes) and is evaluated on eval.split. Writes "
                              "DIR/ablation.csv, .md, .png after each row; rerunning with the same DIR skips finished "
                              "rows. Exit status 1 when rows that differ only by placement have unequal losses. "
                              "See docs/ablations.md.",
                     .options = register_ablate_options,
                     .run = ablate,
                     .multi_rank = true});

}  // namespace vlm

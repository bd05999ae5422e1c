// The rows of `vlm ablate` and the files it writes in its --out folder
// (docs/ablations.md): ablation.csv (every column, read back to resume) and ablation.md
// (the rows, then their summary over seeds); its pictures are ablate/ablate_charts.h.
// Every file is written atomically.
// Invariants:
//  - A row's key is (placement, lod, budget, seed, tp, dp); the CSV holds each key once.
//  - The derived columns are recomputed from the rows at every write, never trusted from
//    a file: precision_random (the relevance precision of the lod=random row with the
//    same placement, budget, seed and layout) and loss_check (see check_placements).
//  - Summary over seeds (summarize): rows equal but for the seed form a group; its
//    accuracy is the mean p over the S seeds, with the standard error over seeds and
//    questions  se = sqrt(var_seeds / S + p (1 - p) / n)  (var_seeds the sample variance
//    of the seeds' accuracies, 0 for one seed; n the questions answered per seed: every
//    seed answers the same questions, so their sampling error does not shrink with S).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vlm {

// Training curves are kept as the means over this many equal parts of the steps.
inline constexpr int kTrainingParts = 10;

struct AblationRow {
  // The key, and the configuration fingerprint of the ablation it belongs to.
  std::string placement, lod;
  int64_t budget = 0, seed = 0;
  int tp = 1, dp = 1;
  int64_t steps = 0;
  std::string config;
  // Measured.
  double tokens_per_image = 0, first_loss = 0, loss = 0, val_loss = 0;
  double accuracy = 0;
  int64_t answered = 0;
  double precision = 0, precision_chance = 0;
  // Detail precision (scorers/relevance_precision.h) and the accuracy on the questions
  // whose box was wholly at full detail (-1: none was).
  double detail = 0, detailed_accuracy = -1;
  double step_ms = 0, images_per_s = 0, mem_mib = 0, tp_bytes = 0, dp_bytes = 0, seconds = 0;
  std::vector<double> early_losses;  // the losses of the first steps (ablate.check_steps)
  // Over kTrainingParts equal parts of the steps (train/lod_metrics.h): the mean
  // relevance precision of the training batches (-1 without boxes) and the mean norm of
  // the scorers' gradient.
  std::vector<double> train_precision, scorer_grad;
  // Derived (recomputed): -1 = no random row / no reference.
  double precision_random = -1;
  std::string loss_check = "-";  // "ref", "ok", "MISMATCH", "-" (no other placement)
  double early_diff = -1, val_diff = -1;  // relative differences to the group's reference

  std::string key() const;  // "replicated relevance 64 seed=1 tp=1 dp=1"
};

// The rows of one (placement, lod, budget, tp, dp, steps) over their seeds.
struct AblationSummary {
  std::string placement, lod;
  int64_t budget = 0, steps = 0, answered = 0;
  int tp = 1, dp = 1, seeds = 0;
  double tokens_per_image = 0, val_loss = 0;
  double accuracy = 0, accuracy_se = 0;      // mean over seeds; se over seeds and questions (above)
  double precision = 0, precision_se = 0;    // mean over seeds; se over seeds (0 for one seed)
  double precision_random = -1, precision_chance = 0;
  double detail = 0, detail_se = 0;          // mean over seeds; se over seeds
  double detailed_accuracy = -1;             // mean over the seeds that have one (-1: none)
  std::vector<double> train_precision, scorer_grad;  // means over seeds, per part
};
// Groups in order of first appearance.
std::vector<AblationSummary> summarize(const std::vector<AblationRow>& rows);

// Fills loss_check, early_diff and val_diff of every row: rows equal in everything but
// the placement form a group; its reference is the replicated row (else the first of the
// group in row order); every other row's early losses (the steps both rows have) must
// equal the reference's to `tol` relative (|a - b| <= tol * max(|a|, |b|)), else it is
// "MISMATCH". Only the first steps are compared: the placements sum the same terms in
// another order, and training (the discrete LOD allocation above all) amplifies those
// rounding differences step after step (docs/ablations.md); val_diff reports where the
// runs ended. Returns one line per mismatch, naming both rows and the difference.
std::vector<std::string> check_placements(std::vector<AblationRow>& rows, double tol);
// Fills precision_random of every row.
void fill_random_precision(std::vector<AblationRow>& rows);

// A series of numbers as one field: the values at `digits` significant digits joined by
// ';' (17: read back exactly), and back (empty entries skipped; UserError naming `where`
// and `column` on an entry that is not a number).
std::string series_text(const std::vector<double>& v, int digits);
std::vector<double> series_values(const std::string& text, const std::string& where, const char* column);

std::string ablation_csv(const std::vector<AblationRow>& rows);
// The rows of an ablation.csv's text (`path` names it in errors): UserError on a header
// other than ablation_csv's or a malformed line.
std::vector<AblationRow> parse_ablation_csv(const std::string& text, const std::string& path);
// `command`: the command line, printed under the table. `tol`: the loss check's tolerance.
std::string ablation_markdown(const std::vector<AblationRow>& rows, const std::string& command, double tol);

}  // namespace vlm

// Rows, checks and files of `vlm ablate` (ablate/ablate_table.h).
#include "ablate/ablate_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "base/error.h"

namespace vlm {

namespace {

const char* const kColumns[] = {"placement", "lod", "budget", "seed", "tp", "dp", "steps", "config", "tokens_per_image",
                                "first_loss", "loss", "val_loss", "accuracy", "answered", "precision",
                                "precision_random", "precision_chance", "detail", "detailed_accuracy", "step_ms", "images_per_s", "mem_mib_per_rank",
                                "tp_bytes_per_step", "dp_bytes_per_step", "seconds", "loss_check",
                                "early_diff", "val_diff", "early_losses", "train_precision", "scorer_grad"};
constexpr size_t kNumColumns = sizeof kColumns / sizeof kColumns[0];
constexpr double kAny = HUGE_VAL;  // no upper bound

std::string num(double v, int digits = 9) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t p = s.find(sep, at);
    out.push_back(s.substr(at, p == std::string::npos ? std::string::npos : p - at));
    if (p == std::string::npos) return out;
    at = p + 1;
  }
}

// Rows equal but for the placement share this.
auto group_of(const AblationRow& r) { return std::tie(r.lod, r.budget, r.seed, r.tp, r.dp, r.steps); }
// Rows equal but for the seed share this.
auto seeds_of(const AblationRow& r) { return std::tie(r.placement, r.lod, r.budget, r.tp, r.dp, r.steps); }

// Element-wise mean of equal-length curves, entries < 0 left out (-1 where none).
std::vector<double> mean_curve(const std::vector<const std::vector<double>*>& curves) {
  size_t n = 0;
  for (const auto* c : curves) n = std::max(n, c->size());
  std::vector<double> out(n, -1.0);
  for (size_t k = 0; k < n; ++k) {
    double sum = 0;
    int m = 0;
    for (const auto* c : curves)
      if (k < c->size() && (*c)[k] >= 0) sum += (*c)[k], ++m;
    if (m) out[k] = sum / m;
  }
  return out;
}

// A fraction as a percentage with one decimal, "-" when negative (none measured).
std::string percent(double v) {
  if (v < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * v);
  return b;
}

double rel_diff(double a, double b) {
  const double m = std::max(std::abs(a), std::abs(b));
  return m > 0 ? std::abs(a - b) / m : 0.0;
}

}  // namespace

std::string series_text(const std::vector<double>& v, int digits) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ';';
    s += num(v[k], digits);
  }
  return s;
}

std::vector<double> series_values(const std::string& text, const std::string& where, const char* column) {
  std::vector<double> out;
  for (const std::string& x : split(text, ';')) {
    if (x.empty()) continue;
    double v = 0;
    auto [p, ec] = std::from_chars(x.data(), x.data() + x.size(), v);
    VLM_REQUIRE(ec == std::errc() && p == x.data() + x.size(), where, ": ", column, " holds '", x, "', not a number");
    out.push_back(v);
  }
  return out;
}

std::string AblationRow::key() const {
  return placement + " " + lod + " " + std::to_string(budget) + " seed=" + std::to_string(seed) +
         " tp=" + std::to_string(tp) + " dp=" + std::to_string(dp);
}

std::vector<std::string> check_placements(std::vector<AblationRow>& rows, double tol) {
  std::vector<std::string> bad;
  for (AblationRow& r : rows) r.loss_check = std::string(1, '-'), r.early_diff = r.val_diff = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].loss_check != "-") continue;
    std::vector<size_t> g;
    for (size_t j = i; j < rows.size(); ++j)
      if (group_of(rows[j]) == group_of(rows[i])) g.push_back(j);
    if (g.size() < 2) continue;
    size_t ref = g[0];
    for (size_t j : g)
      if (rows[j].placement == "replicated") ref = j;
    rows[ref].loss_check = "ref";
    const AblationRow& R = rows[ref];
    for (size_t j : g) {
      if (j == ref) continue;
      AblationRow& r = rows[j];
      double d = rel_diff(r.first_loss, R.first_loss);
      size_t worst = 0;
      const size_t n = std::min(r.early_losses.size(), R.early_losses.size());
      for (size_t k = 0; k < n; ++k)
        if (rel_diff(r.early_losses[k], R.early_losses[k]) > d) d = rel_diff(r.early_losses[k], R.early_losses[k]), worst = k;
      r.early_diff = d, r.val_diff = rel_diff(r.val_loss, R.val_loss);
      r.loss_check = d <= tol ? "ok" : "MISMATCH";
      if (d > tol) {
        std::ostringstream os;
        os << "loss mismatch: " << r.key() << " against " << R.key() << ": step " << worst + 1 << " loss "
           << num(n ? r.early_losses[worst] : r.first_loss, 8) << " vs " << num(n ? R.early_losses[worst] : R.first_loss, 8)
           << ", relative difference " << num(d, 3) << " > " << num(tol, 3) << " (steps 1-" << n << " compared)";
        bad.push_back(os.str());
      }
    }
  }
  return bad;
}

void fill_random_precision(std::vector<AblationRow>& rows) {
  for (AblationRow& r : rows) {
    r.precision_random = -1;
    for (const AblationRow& q : rows)
      if (q.lod == "random" && q.placement == r.placement && q.budget == r.budget && q.seed == r.seed && q.tp == r.tp &&
          q.dp == r.dp && q.steps == r.steps)
        r.precision_random = q.precision;
  }
}

std::string ablation_csv(const std::vector<AblationRow>& rows) {
  std::string s;
  for (size_t c = 0; c < kNumColumns; ++c) s += std::string(c ? "," : "") + kColumns[c];
  s += "\n";
  for (const AblationRow& r : rows) {
    const std::vector<std::string> v = {r.placement, r.lod, std::to_string(r.budget), std::to_string(r.seed),
                                        std::to_string(r.tp),
                                        std::to_string(r.dp), std::to_string(r.steps), r.config,
                                        num(r.tokens_per_image), num(r.first_loss, 17), num(r.loss, 17),
                                        num(r.val_loss, 17), num(r.accuracy), std::to_string(r.answered),
                                        num(r.precision), r.precision_random < 0 ? "" : num(r.precision_random),
                                        num(r.precision_chance), num(r.detail),
                                        r.detailed_accuracy < 0 ? "" : num(r.detailed_accuracy), num(r.step_ms), num(r.images_per_s), num(r.mem_mib),
                                        num(r.tp_bytes, 12), num(r.dp_bytes, 12), num(r.seconds), r.loss_check,
                                        r.early_diff < 0 ? "" : num(r.early_diff, 3),
                                        r.val_diff < 0 ? "" : num(r.val_diff, 3), series_text(r.early_losses, 17),
                                        series_text(r.train_precision, 9), series_text(r.scorer_grad, 9)};
    for (size_t c = 0; c < v.size(); ++c) s += (c ? "," : "") + v[c];
    s += "\n";
  }
  return s;
}

std::vector<AblationRow> parse_ablation_csv(const std::string& text, const std::string& path) {
  std::vector<AblationRow> rows;
  const std::vector<std::string> lines = split(text, '\n');
  VLM_REQUIRE(!lines.empty() && lines[0] == split(ablation_csv({}), '\n')[0], path,
              ": not an ablation.csv of this vlm ablate (its header differs; use another --out)");
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<std::string> f = split(lines[i], ',');
    const std::string where = path + ":" + std::to_string(i + 1);
    VLM_REQUIRE(f.size() == kNumColumns, where, ": expected ", kNumColumns, " comma-separated fields, got ", f.size());
    auto d = [&](size_t c) {
      if (f[c].empty()) return -1.0;
      double v = 0;
      auto [p, ec] = std::from_chars(f[c].data(), f[c].data() + f[c].size(), v);
      VLM_REQUIRE(ec == std::errc() && p == f[c].data() + f[c].size(), where, ": column ", kColumns[c], " = '", f[c],
                  "' is not a number");
      return v;
    };
    AblationRow r;
    r.placement = f[0], r.lod = f[1], r.budget = int64_t(d(2)), r.seed = int64_t(d(3)), r.tp = int(d(4));
    r.dp = int(d(5)), r.steps = int64_t(d(6)), r.config = f[7], r.tokens_per_image = d(8), r.first_loss = d(9);
    r.loss = d(10), r.val_loss = d(11), r.accuracy = d(12), r.answered = int64_t(d(13)), r.precision = d(14);
    r.precision_random = d(15), r.precision_chance = d(16), r.detail = d(17), r.detailed_accuracy = d(18);
    r.step_ms = d(19), r.images_per_s = d(20);
    r.mem_mib = d(21), r.tp_bytes = d(22), r.dp_bytes = d(23), r.seconds = d(24), r.loss_check = f[25];
    // What the writer can have written: shares in [0, 1], counts and sizes not negative,
    // a row's key at least 1 (an edited or damaged row is refused, not shown).
    const auto within = [&](size_t c, double v, double lo, double hi) {
      VLM_REQUIRE(std::isfinite(v) && v >= lo && v <= hi, where, ": column ", kColumns[c], " = '", f[c],
                  "' is outside [", num(lo), ", ", hi == kAny ? std::string("inf") : num(hi), "]");
    };
    for (size_t c : {size_t(2), size_t(4), size_t(5), size_t(6)}) within(c, d(c), 1, kAny);
    for (size_t c : {size_t(12), size_t(14), size_t(16), size_t(17)}) within(c, d(c), 0, 1);
    for (size_t c : {size_t(15), size_t(18)})
      if (!f[c].empty()) within(c, d(c), 0, 1);
    for (size_t c : {size_t(8), size_t(13), size_t(19), size_t(20), size_t(21), size_t(22), size_t(23), size_t(24)})
      within(c, d(c), 0, kAny);
    for (size_t c : {size_t(9), size_t(10), size_t(11)})  // a loss: not negative (nan and inf: a diverged run)
      VLM_REQUIRE(!(d(c) < 0), where, ": column ", kColumns[c], " = '", f[c], "' is negative");
    r.early_losses = series_values(f[28], where, "early_losses");
    r.train_precision = series_values(f[29], where, "train_precision");
    r.scorer_grad = series_values(f[30], where, "scorer_grad");
    rows.push_back(r);
  }
  return rows;
}

std::vector<AblationSummary> summarize(const std::vector<AblationRow>& rows) {
  std::vector<AblationSummary> out;
  std::vector<bool> used(rows.size(), false);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (used[i]) continue;
    std::vector<const AblationRow*> g;
    for (size_t j = i; j < rows.size(); ++j)
      if (!used[j] && seeds_of(rows[j]) == seeds_of(rows[i])) g.push_back(&rows[j]), used[j] = true;
    const AblationRow& f = *g[0];
    AblationSummary m;
    m.placement = f.placement, m.lod = f.lod, m.budget = f.budget, m.steps = f.steps, m.tp = f.tp, m.dp = f.dp;
    m.seeds = int(g.size()), m.answered = f.answered, m.precision_chance = f.precision_chance;
    const double S = double(g.size());
    double rand = 0, da = 0;
    int nrand = 0, nda = 0;
    std::vector<const std::vector<double>*> tp, sg;
    for (const AblationRow* r : g) {
      m.tokens_per_image += r->tokens_per_image / S, m.val_loss += r->val_loss / S;
      m.accuracy += r->accuracy / S, m.precision += r->precision / S, m.detail += r->detail / S;
      if (r->detailed_accuracy >= 0) da += r->detailed_accuracy, ++nda;
      m.answered = std::min(m.answered, r->answered);
      if (r->precision_random >= 0) rand += r->precision_random, ++nrand;
      tp.push_back(&r->train_precision), sg.push_back(&r->scorer_grad);
    }
    m.precision_random = nrand ? rand / nrand : -1.0;
    m.detailed_accuracy = nda ? da / nda : -1.0;
    // The sample variance over the seeds of a column with mean `mean` (0 for one seed).
    const auto seed_var = [&](double AblationRow::*column, double mean) {
      double v = 0;
      for (const AblationRow* r : g) v += (r->*column - mean) * (r->*column - mean);
      return g.size() > 1 ? v / (S - 1) : 0.0;
    };
    const double p = m.accuracy, n = double(std::max<int64_t>(1, m.answered));
    m.accuracy_se = std::sqrt(seed_var(&AblationRow::accuracy, m.accuracy) / S + p * (1 - p) / n);
    m.precision_se = std::sqrt(seed_var(&AblationRow::precision, m.precision) / S);
    m.detail_se = std::sqrt(seed_var(&AblationRow::detail, m.detail) / S);
    m.train_precision = mean_curve(tp), m.scorer_grad = mean_curve(sg);
    out.push_back(m);
  }
  return out;
}

std::string ablation_markdown(const std::vector<AblationRow>& rows, const std::string& command, double tol) {
  std::ostringstream os;
  os << "| placement | lod | budget | seed | tp x dp | steps | tokens/img | val loss | accuracy | rel. precision "
        "(random row / chance) | detail (accuracy there) | ms/step | img/s | MiB/rank | TP B/step | DP B/step | "
        "loss check (early / val diff) |\n"
     << "|---|---|---:|---:|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|\n";
  char b[512];
  for (const AblationRow& r : rows) {
    const std::string diffs = r.early_diff < 0 ? "" : " (" + num(r.early_diff, 2) + " / " + num(r.val_diff, 2) + ")";
    std::snprintf(b, sizeof b,
                  "| %s | %s | %lld | %lld | %d x %d | %lld | %.1f | %.4f | %.1f%% (%lld) | %.3f (%s / %.3f) | %.3f (%s) | "
                  "%.0f | %.1f | %.1f | %.3g | %.3g | %s%s |\n",
                  r.placement.c_str(), r.lod.c_str(), (long long)r.budget, (long long)r.seed, r.tp, r.dp,
                  (long long)r.steps, r.tokens_per_image, r.val_loss, 100.0 * r.accuracy, (long long)r.answered,
                  r.precision, r.precision_random < 0 ? "-" : num(r.precision_random, 3).c_str(), r.precision_chance,
                  r.detail, percent(r.detailed_accuracy).c_str(), r.step_ms, r.images_per_s, r.mem_mib, r.tp_bytes, r.dp_bytes,
                  r.loss_check == "MISMATCH" ? "**MISMATCH**" : r.loss_check.c_str(), diffs.c_str());
    os << b;
  }
  os << "\nLoss check: rows equal but for the placement must have equal losses over their first steps to "
     << num(tol, 3) << " relative (ref = the group's reference row); the relative differences of those steps and of "
     << "the final validation loss are in brackets.\n";
  os << "\nOver seeds (mean; accuracy +- one standard error over seeds and questions, sqrt(var_seeds / S + "
        "p (1 - p) / n); precisions +- their standard error over seeds):\n\n"
     << "| placement | lod | budget | tp x dp | seeds | tokens/img | val loss | accuracy | rel. precision | "
        "random row | chance | detail | accuracy there |\n|---|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|---:|\n";
  for (const AblationSummary& m : summarize(rows)) {
    std::snprintf(b, sizeof b,
                  "| %s | %s | %lld | %d x %d | %d | %.1f | %.4f | %.1f%% +- %.1f | %.3f +- %.3f | %s | %.3f | "
                  "%.3f +- %.3f | %s |\n",
                  m.placement.c_str(), m.lod.c_str(), (long long)m.budget, m.tp, m.dp, m.seeds, m.tokens_per_image,
                  m.val_loss, 100.0 * m.accuracy, 100.0 * m.accuracy_se, m.precision, m.precision_se,
                  m.precision_random < 0 ? "-" : num(m.precision_random, 3).c_str(), m.precision_chance, m.detail,
                  m.detail_se, percent(m.detailed_accuracy).c_str());
    os << b;
  }
  if (!command.empty()) os << "\nCommand: `" << command << "`\n";
  return os.str();
}

}  // namespace vlm

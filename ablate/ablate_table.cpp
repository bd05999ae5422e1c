// Rows, checks and files of `vlm ablate` (ablate/ablate_table.h).
#include "ablate/ablate_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "base/error.h"
#include "picture/line_chart.h"

namespace vlm {

namespace {

const char* const kColumns[] = {"placement", "lod", "budget", "tp", "dp", "steps", "config", "tokens_per_image",
                                "first_loss", "loss", "val_loss", "accuracy", "answered", "precision",
                                "precision_random", "precision_chance", "step_ms", "images_per_s", "mem_mib_per_rank",
                                "tp_bytes_per_step", "dp_bytes_per_step", "seconds", "loss_check",
                                "early_diff", "val_diff", "early_losses"};
constexpr size_t kNumColumns = sizeof kColumns / sizeof kColumns[0];

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
auto group_of(const AblationRow& r) { return std::tie(r.lod, r.budget, r.tp, r.dp, r.steps); }

double rel_diff(double a, double b) {
  const double m = std::max(std::abs(a), std::abs(b));
  return m > 0 ? std::abs(a - b) / m : 0.0;
}

}  // namespace

std::string AblationRow::key() const {
  return placement + " " + lod + " " + std::to_string(budget) + " tp=" + std::to_string(tp) +
         " dp=" + std::to_string(dp);
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
      if (q.lod == "random" && q.placement == r.placement && q.budget == r.budget && q.tp == r.tp && q.dp == r.dp &&
          q.steps == r.steps)
        r.precision_random = q.precision;
  }
}

std::string ablation_csv(const std::vector<AblationRow>& rows) {
  std::string s;
  for (size_t c = 0; c < kNumColumns; ++c) s += std::string(c ? "," : "") + kColumns[c];
  s += "\n";
  for (const AblationRow& r : rows) {
    std::string early;
    for (size_t k = 0; k < r.early_losses.size(); ++k) {
      if (k) early.push_back(';');
      early.append(num(r.early_losses[k], 17));
    }
    const std::vector<std::string> v = {r.placement, r.lod, std::to_string(r.budget), std::to_string(r.tp),
                                        std::to_string(r.dp), std::to_string(r.steps), r.config,
                                        num(r.tokens_per_image), num(r.first_loss, 17), num(r.loss, 17),
                                        num(r.val_loss, 17), num(r.accuracy), std::to_string(r.answered),
                                        num(r.precision), r.precision_random < 0 ? "" : num(r.precision_random),
                                        num(r.precision_chance), num(r.step_ms), num(r.images_per_s), num(r.mem_mib),
                                        num(r.tp_bytes, 12), num(r.dp_bytes, 12), num(r.seconds), r.loss_check,
                                        r.early_diff < 0 ? "" : num(r.early_diff, 3),
                                        r.val_diff < 0 ? "" : num(r.val_diff, 3), early};
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
    r.placement = f[0], r.lod = f[1], r.budget = int64_t(d(2)), r.tp = int(d(3)), r.dp = int(d(4));
    r.steps = int64_t(d(5)), r.config = f[6], r.tokens_per_image = d(7), r.first_loss = d(8), r.loss = d(9);
    r.val_loss = d(10), r.accuracy = d(11), r.answered = int64_t(d(12)), r.precision = d(13);
    r.precision_random = d(14), r.precision_chance = d(15), r.step_ms = d(16), r.images_per_s = d(17);
    r.mem_mib = d(18), r.tp_bytes = d(19), r.dp_bytes = d(20), r.seconds = d(21), r.loss_check = f[22];
    for (const std::string& x : split(f[25], ';')) {
      if (x.empty()) continue;
      double v = 0;
      auto [p, ec] = std::from_chars(x.data(), x.data() + x.size(), v);
      VLM_REQUIRE(ec == std::errc() && p == x.data() + x.size(), where, ": early_losses holds '", x, "', not a number");
      r.early_losses.push_back(v);
    }
    rows.push_back(r);
  }
  return rows;
}

std::string ablation_markdown(const std::vector<AblationRow>& rows, const std::string& command, double tol) {
  std::ostringstream os;
  os << "| placement | lod | budget | tp x dp | steps | tokens/img | val loss | accuracy | rel. precision "
        "(random row / chance) | ms/step | img/s | MiB/rank | TP B/step | DP B/step | loss check (early / val diff) |\n"
     << "|---|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n";
  char b[512];
  for (const AblationRow& r : rows) {
    const std::string diffs = r.early_diff < 0 ? "" : " (" + num(r.early_diff, 2) + " / " + num(r.val_diff, 2) + ")";
    std::snprintf(b, sizeof b,
                  "| %s | %s | %lld | %d x %d | %lld | %.1f | %.4f | %.1f%% (%lld) | %.3f (%s / %.3f) | %.0f | %.1f | "
                  "%.1f | %.3g | %.3g | %s%s |\n",
                  r.placement.c_str(), r.lod.c_str(), (long long)r.budget, r.tp, r.dp, (long long)r.steps,
                  r.tokens_per_image, r.val_loss, 100.0 * r.accuracy, (long long)r.answered, r.precision,
                  r.precision_random < 0 ? "-" : num(r.precision_random, 3).c_str(), r.precision_chance, r.step_ms,
                  r.images_per_s, r.mem_mib, r.tp_bytes, r.dp_bytes,
                  r.loss_check == "MISMATCH" ? "**MISMATCH**" : r.loss_check.c_str(),
                  diffs.c_str());
    os << b;
  }
  os << "\nLoss check: rows equal but for the placement must have equal losses over their first steps to "
     << num(tol, 3) << " relative (ref = the group's reference row); the relative differences of those steps and of "
     << "the final validation loss are in brackets.\n";
  if (!command.empty()) os << "\nCommand: `" << command << "`\n";
  return os.str();
}

std::string ablation_chart_png(const std::vector<AblationRow>& rows) {
  std::map<std::tuple<std::string, int, int>, int> count;
  std::tuple<std::string, int, int> best;
  int most = 0;
  for (const AblationRow& r : rows) {
    const int c = ++count[{r.placement, r.tp, r.dp}];
    if (c > most) most = c, best = {r.placement, r.tp, r.dp};
  }
  std::vector<ChartSeries> series;
  for (const char* lod : {"relevance", "uniform", "random"}) {
    std::vector<std::pair<double, double>> pts;
    for (const AblationRow& r : rows)
      if (r.lod == lod && std::tie(r.placement, r.tp, r.dp) == best)
        pts.push_back({r.tokens_per_image, 100.0 * r.accuracy});
    if (pts.empty()) continue;
    std::sort(pts.begin(), pts.end());
    ChartSeries s;
    s.name = lod;
    for (const auto& [x, y] : pts) s.x.push_back(x), s.y.push_back(y);
    series.push_back(s);
  }
  ChartOptions o;
  o.title = "answer accuracy vs visual tokens (" + std::get<0>(best) + ", tp=" + std::to_string(std::get<1>(best)) +
            " dp=" + std::to_string(std::get<2>(best)) + ")";
  o.x_label = "mean visual tokens per image";
  o.y_label = "answer accuracy (%)";
  return render_line_chart_png(series, o);
}

}  // namespace vlm

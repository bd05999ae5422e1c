// The charts of `vlm ablate` (ablate/ablate_charts.h).
#include "ablate/ablate_charts.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "picture/line_chart.h"

namespace vlm {

namespace {

// The placement and layout with the most rows.
std::tuple<std::string, int, int> main_layout(const std::vector<AblationRow>& rows) {
  std::map<std::tuple<std::string, int, int>, int> count;
  std::tuple<std::string, int, int> best;
  int most = 0;
  for (const AblationRow& r : rows) {
    const int c = ++count[{r.placement, r.tp, r.dp}];
    if (c > most) most = c, best = {r.placement, r.tp, r.dp};
  }
  return best;
}

std::string layout_text(const std::tuple<std::string, int, int>& l) {
  return std::get<0>(l) + ", tp=" + std::to_string(std::get<1>(l)) + " dp=" + std::to_string(std::get<2>(l));
}

}  // namespace

std::string ablation_chart_png(const std::vector<AblationRow>& rows) {
  const auto best = main_layout(rows);
  const std::vector<AblationSummary> sums = summarize(rows);
  std::vector<ChartSeries> series;
  for (const char* lod : {"relevance", "uniform", "random"}) {
    std::vector<std::tuple<double, double, double>> pts;
    for (const AblationSummary& m : sums)
      if (m.lod == lod && std::tie(m.placement, m.tp, m.dp) == best)
        pts.push_back({m.tokens_per_image, 100.0 * m.accuracy, 100.0 * m.accuracy_se});
    if (pts.empty()) continue;
    std::sort(pts.begin(), pts.end());
    ChartSeries s;
    s.name = lod;
    for (const auto& [x, y, e] : pts) s.x.push_back(x), s.y.push_back(y), s.err.push_back(e);
    series.push_back(s);
  }
  ChartOptions o;
  o.title = "accuracy vs tokens (" + layout_text(best) + "; bars 1 s.e.)";
  o.x_label = "mean visual tokens per image";
  o.y_label = "answer accuracy (%)";
  return render_line_chart_png(series, o);
}

std::string training_chart_png(const std::vector<AblationRow>& rows) {
  const auto best = main_layout(rows);
  const std::vector<AblationSummary> sums = summarize(rows);
  int64_t smallest = -1;
  for (const AblationSummary& m : sums)
    if (std::tie(m.placement, m.tp, m.dp) == best && (smallest < 0 || m.budget < smallest)) smallest = m.budget;
  std::vector<ChartSeries> series;
  double chance = -1, steps = 0;
  for (const char* lod : {"relevance", "uniform", "random"})
    for (const AblationSummary& m : sums) {
      if (m.lod != lod || m.budget != smallest || std::tie(m.placement, m.tp, m.dp) != best) continue;
      ChartSeries s;
      s.name = std::string(lod) + " (" + std::to_string(m.seeds) + (m.seeds > 1 ? " seeds)" : " seed)");
      const size_t n = m.train_precision.size();
      for (size_t k = 0; k < n; ++k)
        if (m.train_precision[k] >= 0) {
          s.x.push_back(double(m.steps) * (double(k) + 0.5) / double(n));
          s.y.push_back(m.train_precision[k]);
        }
      series.push_back(s);
      chance = m.precision_chance, steps = double(m.steps);
    }
  if (chance >= 0) series.push_back({"chance (at test)", {0.0, steps}, {chance, chance}, {}});
  ChartOptions o;
  o.title = "relevance precision in training, budget " + std::to_string(smallest);
  o.x_label = "training step";
  o.y_label = "relevance precision";
  return render_line_chart_png(series, o);
}

}  // namespace vlm

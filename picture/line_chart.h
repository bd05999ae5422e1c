// A line chart rendered to PNG bytes (OpenCV inside line_chart.cpp): axes with "nice"
// ticks and their numbers, axis labels, a title, one polyline with markers per series in
// a fixed colour cycle, optional vertical error bars (y - err to y + err, with caps), and
// a legend box in the lower right corner. Used by `vlm ablate` (ablation.png,
// training.png). Invariants: points are drawn in the order given (sort them by x
// first); the axes cover every finite point and error bar, with 5% margins; a chart without any finite
// point is drawn with axes [0, 1] x [0, 1]; non-finite points are skipped.
#pragma once
#include <string>
#include <vector>

namespace vlm {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;  // equal sizes
  std::vector<double> err;   // empty, or the half-length of each point's error bar (x's size)
};

struct ChartOptions {
  std::string title, x_label, y_label;
  int width = 720, height = 480;  // pixels
  bool y_from_zero = true;        // the y axis starts at 0 (or below, if a point is)
};

std::string render_line_chart_png(const std::vector<ChartSeries>& series, const ChartOptions& o);

}  // namespace vlm

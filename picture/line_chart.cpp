// Line charts with OpenCV (picture/line_chart.h).
#include "picture/line_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "base/error.h"
#include "data/image/png.h"

namespace vlm {

namespace {

// The tick step of about `n` ticks over [lo, hi]: 1, 2 or 5 times a power of ten.
double nice_step(double lo, double hi, int n) {
  const double raw = (hi - lo) / std::max(1, n);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string tick_text(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// The half-length of point i's error bar (0 without one, or when not finite).
double error_of(const ChartSeries& s, size_t i) {
  return i < s.err.size() && std::isfinite(s.err[i]) && s.err[i] > 0 ? s.err[i] : 0.0;
}

const cv::Scalar kColours[] = {{214, 39, 40}, {31, 119, 180}, {44, 160, 44}, {255, 127, 14},
                               {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};  // RGB

}  // namespace

std::string render_line_chart_png(const std::vector<ChartSeries>& series, const ChartOptions& o) {
  VLM_REQUIRE(o.width >= 200 && o.height >= 150, "line chart: ", o.width, " x ", o.height,
              " pixels is too small (at least 200 x 150)");
  double x0 = INFINITY, x1 = -INFINITY, y0 = o.y_from_zero ? 0.0 : INFINITY, y1 = -INFINITY;
  for (const ChartSeries& s : series) {
    VLM_REQUIRE(s.x.size() == s.y.size(), "line chart: series '", s.name, "' has ", s.x.size(), " x and ",
                s.y.size(), " y values");
    VLM_REQUIRE(s.err.empty() || s.err.size() == s.x.size(), "line chart: series '", s.name, "' has ", s.x.size(),
                " points and ", s.err.size(), " error bars");
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        const double e = error_of(s, i);
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i] - e), y1 = std::max(y1, s.y[i] + e);
      }
  }
  if (!(x0 <= x1)) x0 = 0, x1 = 1;
  if (!(y0 <= y1)) y0 = 0, y1 = 1;
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y1 = y0 + std::max(1.0, std::abs(y0) * 0.1);
  const double mx = 0.05 * (x1 - x0), my = 0.05 * (y1 - y0);
  x0 -= mx, x1 += mx, y1 += my;
  if (!o.y_from_zero || y0 < 0) y0 -= my;

  cv::Mat m(o.height, o.width, CV_8UC3, cv::Scalar(255, 255, 255));
  const int left = 96, right = o.width - 20, top = 40, bottom = o.height - 60;
  auto px = [&](double x) { return int(std::lround(left + (x - x0) / (x1 - x0) * (right - left))); };
  auto py = [&](double y) { return int(std::lround(bottom - (y - y0) / (y1 - y0) * (bottom - top))); };
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  const cv::Scalar black(0, 0, 0), grid(225, 225, 225);
  auto text = [&](const std::string& t, cv::Point p, double scale, bool centre_x, bool right_x) {
    int base = 0;
    const cv::Size sz = cv::getTextSize(t, font, scale, 1, &base);
    if (centre_x) p.x -= sz.width / 2;
    if (right_x) p.x -= sz.width;
    cv::putText(m, t, p, font, scale, black, 1, cv::LINE_AA);
  };
  // Ticks, grid lines and numbers.
  const double sx = nice_step(x0, x1, 8), sy = nice_step(y0, y1, 6);
  for (double v = std::ceil(x0 / sx) * sx; v <= x1 + 1e-9 * sx; v += sx) {
    cv::line(m, {px(v), top}, {px(v), bottom}, grid, 1);
    cv::line(m, {px(v), bottom}, {px(v), bottom + 5}, black, 1);
    text(tick_text(v, sx), {px(v), bottom + 20}, 0.45, true, false);
  }
  for (double v = std::ceil(y0 / sy) * sy; v <= y1 + 1e-9 * sy; v += sy) {
    cv::line(m, {left, py(v)}, {right, py(v)}, grid, 1);
    cv::line(m, {left - 5, py(v)}, {left, py(v)}, black, 1);
    text(tick_text(v, sy), {left - 8, py(v) + 5}, 0.45, false, true);
  }
  cv::rectangle(m, {left, top}, {right, bottom}, black, 1);
  text(o.title, {(left + right) / 2, 25}, 0.6, true, false);
  text(o.x_label, {(left + right) / 2, o.height - 18}, 0.5, true, false);
  {  // the y label, rotated: drawn on its own image, then turned
    int base = 0;
    const cv::Size sz = cv::getTextSize(o.y_label, font, 0.5, 1, &base);
    cv::Mat t(sz.height + base + 4, sz.width + 4, CV_8UC3, cv::Scalar(255, 255, 255)), r;
    cv::putText(t, o.y_label, {2, sz.height + 1}, font, 0.5, black, 1, cv::LINE_AA);
    cv::rotate(t, r, cv::ROTATE_90_COUNTERCLOCKWISE);
    const int x = 6, y = std::max(0, (top + bottom) / 2 - r.rows / 2);
    if (y + r.rows <= m.rows && x + r.cols <= m.cols) r.copyTo(m(cv::Rect(x, y, r.cols, r.rows)));
  }
  // Series, then the legend.
  for (size_t k = 0; k < series.size(); ++k) {
    const cv::Scalar c = kColours[k % (sizeof kColours / sizeof kColours[0])];
    const ChartSeries& s = series[k];
    std::vector<cv::Point> pts;
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) pts.push_back({px(s.x[i]), py(s.y[i])});
    if (pts.size() > 1) cv::polylines(m, pts, false, c, 2, cv::LINE_AA);
    for (const cv::Point& p : pts) cv::circle(m, p, 4, c, cv::FILLED, cv::LINE_AA);
    for (size_t i = 0; i < s.x.size(); ++i) {
      const double e = error_of(s, i);
      if (e <= 0 || !std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      const int x = px(s.x[i]), lo = py(s.y[i] - e), hi = py(s.y[i] + e);
      cv::line(m, {x, lo}, {x, hi}, c, 1, cv::LINE_AA);
      cv::line(m, {x - 5, lo}, {x + 5, lo}, c, 1, cv::LINE_AA);
      cv::line(m, {x - 5, hi}, {x + 5, hi}, c, 1, cv::LINE_AA);
    }
  }
  if (!series.empty()) {
    int w = 0;
    for (const ChartSeries& s : series) {
      int base = 0;
      w = std::max(w, cv::getTextSize(s.name, font, 0.45, 1, &base).width);
    }
    const int h = 20 * int(series.size()) + 8, bx = right - w - 50, by = bottom - h - 8;
    cv::rectangle(m, {bx, by}, {right - 8, bottom - 8}, cv::Scalar(255, 255, 255), cv::FILLED);
    cv::rectangle(m, {bx, by}, {right - 8, bottom - 8}, black, 1);
    for (size_t k = 0; k < series.size(); ++k) {
      const cv::Scalar c = kColours[k % (sizeof kColours / sizeof kColours[0])];
      const int y = by + 16 + 20 * int(k);
      cv::line(m, {bx + 8, y - 4}, {bx + 30, y - 4}, c, 2, cv::LINE_AA);
      cv::circle(m, {bx + 19, y - 4}, 3, c, cv::FILLED, cv::LINE_AA);
      text(series[k].name, {bx + 36, y}, 0.45, false, false);
    }
  }
  return encode_png(m.data, m.rows, m.cols, 3);  // the colours above are RGB
}

}  // namespace vlm

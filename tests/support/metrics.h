// The error metrics the tests compare numbers with:
//  - max_err(a, e)     = max_i |a_i - e_i| / (1 + |e_i|): relative for large values,
//                        absolute near zero (op references, finite differences); NaN fails.
//  - max_rel_err(a, e) = max_i |a_i - e_i| / max(max_i |e_i|, 1e-3): the error relative to
//                        the reference's scale (model outputs and gradients; the floor
//                        covers gradients that are exactly 0); a size mismatch fails.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace vlm::test {

inline double max_err(const std::vector<double>& a, const std::vector<double>& e) {
  EXPECT_EQ(a.size(), e.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), e.size()); ++i) {
    double d = std::fabs(a[i] - e[i]) / (1.0 + std::fabs(e[i]));
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

template <typename T>
double max_rel_err(const std::vector<T>& a, const std::vector<T>& e) {
  double m = 0, d = 0;
  for (size_t i = 0; i < a.size() && i < e.size(); ++i) {
    m = std::max(m, std::fabs(double(e[i])));
    const double x = std::fabs(double(a[i]) - double(e[i]));
    d = std::isnan(x) ? INFINITY : std::max(d, x);
  }
  return a.size() == e.size() ? d / std::max(m, 1e-3) : 1e30;
}

}  // namespace vlm::test

// EXPECT that vector `a` matches reference vector `e` within `tol` (max_err).
#define EXPECT_CLOSE(a, e, tol) EXPECT_LE(::vlm::test::max_err((a), (e)), (tol)) << #a " vs " #e

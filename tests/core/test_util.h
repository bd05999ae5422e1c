// Shared helpers of the core tests: a seeded RNG, host tensors from double vectors in
// any float dtype, and the error metric max_i |a_i - e_i| / (1 + |e_i|) (relative for
// large values, absolute near zero).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm::test {

using Vec = std::vector<double>;

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  double uniform(double lo = -1, double hi = 1) {
    return lo + (hi - lo) * double(g_() >> 11) * (1.0 / 9007199254740992.0);
  }
  int randint(int lo, int hi) { return lo + int(g_() % uint64_t(hi - lo + 1)); }  // [lo, hi]
  Vec vec(int64_t n, double lo = -1, double hi = 1) {
    Vec v(static_cast<size_t>(n));
    for (double& x : v) x = uniform(lo, hi);
    return v;
  }
  std::vector<int32_t> ints(int64_t n, int lo, int hi) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = randint(lo, hi);
    return v;
  }

 private:
  std::mt19937_64 g_;
};

// A host tensor of dtype dt (f32, f64 or bf16) holding the values of v (rounded).
inline Tensor host(const Vec& v, Shape s, DType dt = DType::F64) {
  Tensor d = Tensor::from_vector(v, s);
  if (dt == DType::F64) return d;
  Tensor t = Tensor::empty(cpu_backend(), s, dt);
  convert(cpu_backend().default_stream(), t, d);
  return t;
}
inline Tensor host_i32(const std::vector<int32_t>& v, Shape s) { return Tensor::from_vector(v, s); }
inline Tensor zeros(Shape s, DType dt = DType::F64) { return Tensor::zeros(cpu_backend(), s, dt); }

// The values of v as stored in dtype dt (what an op on a dt tensor actually sees).
inline Vec rounded(const Vec& v, DType dt) { return to_vector_f64(host(v, Shape{int64_t(v.size())}, dt)); }

inline double max_err(const Vec& a, const Vec& e) {
  EXPECT_EQ(a.size(), e.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), e.size()); ++i) {
    double d = std::fabs(a[i] - e[i]) / (1.0 + std::fabs(e[i]));
    if (std::isnan(d)) return INFINITY;  // NaN is a failure
    m = std::max(m, d);
  }
  return m;
}

inline Stream& cpu_stream() { return cpu_backend().default_stream(); }

}  // namespace vlm::test

// EXPECT that tensor/vector `a` matches reference vector `e` within `tol` (max_err).
#define EXPECT_CLOSE(a, e, tol) EXPECT_LE(::vlm::test::max_err((a), (e)), (tol)) << #a " vs " #e

// Rng: the seeded random numbers of every test (uniform doubles, vectors, integers), the
// same sequence on every platform (mt19937_64, no std::distribution).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

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

}  // namespace vlm::test

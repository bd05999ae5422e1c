// SceneRng: the random numbers of the scenes converter (convert_scenes.cpp). SplitMix64
// with portable draws (no std:: distributions, whose outputs differ between standard
// libraries), so a seed gives the same scenes with every compiler and library.
// Scene i of a build is drawn from SceneRng(seed, i) alone: scenes do not depend on
// each other or on the order they are made in.
#pragma once
#include <cstdint>

#include "base/splitmix.h"

namespace vlm {

class SceneRng {
 public:
  SceneRng(uint64_t seed, uint64_t stream) : state_(seed ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull)) {
    next();
  }
  uint64_t next() { return splitmix64_next(state_); }
  // Uniform integer in [lo, hi] (hi >= lo), unbiased (rejection).
  int64_t range(int64_t lo, int64_t hi) {
    const uint64_t n = uint64_t(hi - lo) + 1;
    if (n == 0) return int64_t(next());  // the full 64-bit range
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = next();
    while (r >= limit);
    return lo + int64_t(r % n);
  }
  // Uniform in [0, 1) with 53 random bits.
  double unit() { return double(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }

 private:
  uint64_t state_;
};

}  // namespace vlm

// SplitMix64: the one 64-bit mixing function behind the project's portable random
// numbers (no std:: distributions, whose outputs differ between standard libraries):
//  - splitmix64(x): a stateless hash of x, for counter-based draws that depend only on
//    (seed, name, index) (nn/init.h, llm/sampling.h);
//  - splitmix64_next(state): the sequential generator, advancing `state` by the golden
//    gamma (data/load/sampler.cpp, data/convert/scene_rng.h).
// splitmix64_next(s) returns splitmix64(s) of the state before the call.
#pragma once
#include <cstdint>

namespace vlm {

inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

inline uint64_t splitmix64(uint64_t x) {
  x += kSplitMixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t r = splitmix64(state);
  state += kSplitMixGamma;
  return r;
}

}  // namespace vlm

// Properties of the LOD allocation (scorers/lod_allocator.h) over random relevance maps:
// bounds, level counts adding up, squares tiling each region, monotone in relevance
// (within an image and across budgets), deterministic, and the baselines spending the
// same tokens as the relevance policy.
#include <gtest/gtest.h>

#include <set>

#include "scorers/lod_allocator.h"
#include "tests/support/rng.h"

namespace vlm::test {
namespace {

LodConfig config(int R, int64_t lo, int64_t hi, LodPolicy p = LodPolicy::Relevance, int64_t fixed = 0) {
  LodConfig c;
  c.region = R, c.min_tokens = lo, c.max_tokens = hi, c.policy = p, c.fixed_budget = fixed;
  return c;
}

// Random relevance in (0,1): a smooth blob plus noise, with a random mean level.
Vec relevance(Rng& rng, int G) {
  const double cy = rng.uniform(0, G), cx = rng.uniform(0, G), base = rng.uniform(0.05, 0.9);
  Vec r(size_t(G * G));
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x) {
      const double b = std::exp(-((y - cy) * (y - cy) + (x - cx) * (x - cx)) / (0.1 * G * G));
      r[size_t(y * G + x)] = std::clamp(base * (0.5 + 0.5 * b) + 0.05 * rng.uniform(), 0.001, 0.999);
    }
  return r;
}

void check_invariants(const LodAllocator& a, const ImageLod& l) {
  const LodConfig& c = a.config();
  const int64_t T = int64_t(l.tokens.size());
  EXPECT_GE(l.budget, c.min_tokens);
  EXPECT_LE(l.budget, c.max_tokens);
  EXPECT_LE(T, l.budget);
  EXPECT_GE(T, a.regions());
  int64_t from_levels = 0, regions = 0;
  for (int lv = 0; lv < a.levels(); ++lv) from_levels += l.per_level[size_t(lv)] << (2 * lv), regions += l.per_level[size_t(lv)];
  EXPECT_EQ(from_levels, T);
  EXPECT_EQ(regions, a.regions());
  // the refused upgrade did not fit: no region below the top level could be upgraded
  int min_level = a.levels() - 1;
  for (int32_t lv : l.level) min_level = std::min(min_level, lv);
  if (min_level < a.levels() - 1) {
    EXPECT_GT(T + (int64_t(3) << (2 * min_level)), l.budget);
  }
  // the tokens' squares tile the grid exactly once
  std::vector<int> hit(size_t(a.grid() * a.grid()), 0);
  for (const LodToken& k : l.tokens)
    for (int y = k.y0; y < k.y0 + k.side; ++y)
      for (int x = k.x0; x < k.x0 + k.side; ++x) ++hit[size_t(y * a.grid() + x)];
  for (int h : hit) EXPECT_EQ(h, 1);
}

TEST(LodAllocator, PropertiesOverRandomMaps) {
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int R = 1 << rng.randint(0, 3), G = R * rng.randint(1, 8);
    const int64_t regions = int64_t(G / R) * (G / R), cells = int64_t(G) * G;
    const int64_t lo = regions + rng.randint(0, int(cells - regions) / 2);
    const int64_t hi = lo + rng.randint(0, int(cells - lo));
    const LodAllocator rel(config(R, lo, hi), G);
    const Vec r = relevance(rng, G);
    const ImageLod a = rel.allocate(r.data(), 7);
    check_invariants(rel, a);
    // deterministic
    const ImageLod b = rel.allocate(r.data(), 7);
    EXPECT_EQ(a.level, b.level);
    // more region relevance never gets fewer tokens
    std::vector<double> reg(size_t(regions), 0.0);
    for (int y = 0; y < G; ++y)
      for (int x = 0; x < G; ++x) reg[size_t((y / R) * (G / R) + x / R)] += r[size_t(y * G + x)];
    for (size_t i = 0; i < reg.size(); ++i)
      for (size_t j = 0; j < reg.size(); ++j)
        if (reg[i] > reg[j]) {
          EXPECT_GE(a.level[i], a.level[j]);
        }
    // the baselines spend the same tokens
    for (LodPolicy p : {LodPolicy::Uniform, LodPolicy::Random}) {
      const LodAllocator base(config(R, lo, hi, p), G);
      const ImageLod c = base.allocate(r.data(), uint64_t(trial));
      check_invariants(base, c);
      EXPECT_EQ(c.budget, a.budget);
      EXPECT_EQ(c.tokens.size(), a.tokens.size());
    }
    // a fixed budget N gives every image N
    const int64_t N = lo + (hi - lo) / 2;
    const LodAllocator fixed(config(R, lo, hi, LodPolicy::Relevance, N), G);
    EXPECT_EQ(fixed.allocate(r.data(), 0).budget, N);
  }
}

TEST(LodAllocator, MoreRelevanceMoreTokens) {
  const LodAllocator a(config(4, 64, 400), 32);
  int64_t last_budget = 0;
  size_t last_tokens = 0;
  for (double m = 0.0; m <= 1.0; m += 0.01) {
    const Vec r(1024, m);
    const ImageLod l = a.allocate(r.data(), 0);
    EXPECT_GE(l.budget, last_budget);
    EXPECT_GE(l.tokens.size(), last_tokens);
    last_budget = l.budget, last_tokens = l.tokens.size();
  }
  EXPECT_EQ(a.budget(0.0), 64);
  EXPECT_EQ(a.budget(1.0), 400);
  EXPECT_EQ(a.budget(0.5), 232);
}

TEST(LodAllocator, TiesGoToRasterOrderAndRandomDependsOnSeed) {
  const LodAllocator a(config(2, 4, 7), 4);  // 4 regions; budget 7 = one upgrade (cost 3)
  const Vec flat(16, 0.5);
  ImageLod l = a.allocate(flat.data(), 0);
  EXPECT_EQ(l.budget, 6);  // 4 + round(3 * 0.5) = 6 (half away from zero)
  EXPECT_EQ(l.tokens.size(), 4u);
  const LodAllocator f(config(2, 4, 16, LodPolicy::Relevance, 7), 4);
  l = f.allocate(flat.data(), 0);
  EXPECT_EQ(l.level, (std::vector<int32_t>{1, 0, 0, 0}));  // ties: the first region in raster order
  Vec r = flat;
  r[15] = 0.9;  // the last region becomes the most relevant
  l = f.allocate(r.data(), 0);
  EXPECT_EQ(l.level, (std::vector<int32_t>{0, 0, 0, 1}));
  const LodAllocator rnd(config(2, 4, 16, LodPolicy::Random, 7), 4);
  std::set<std::vector<int32_t>> seen;
  for (uint64_t s = 0; s < 32; ++s) seen.insert(rnd.allocate(flat.data(), s).level);
  EXPECT_GT(seen.size(), 1u);
  EXPECT_EQ(rnd.allocate(flat.data(), 3).level, rnd.allocate(flat.data(), 3).level);
}

}  // namespace
}  // namespace vlm::test

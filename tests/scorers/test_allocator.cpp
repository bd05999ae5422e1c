// Properties of the LOD allocation (scorers/lod_allocator.h) over random relevance maps:
// bounds, level counts adding up, squares tiling each region, monotone in relevance
// (within an image and across budgets), deterministic, and the baselines spending the
// same tokens as the relevance policy; lod.order=depth (every region in the order to the
// finest level before the next, the allocation ending at the first upgrade that does
// not fit; uniform unchanged); exploration (the random order with probability explore)
// and its schedule (LodConfig::explore_at); soft steps (lod.gate=soft) and their mix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

void check_invariants(const LodAllocator& a, const ImageLod& l, bool rounds = true) {
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
  if (rounds && min_level < a.levels() - 1) {
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

// Region relevance (sum over its cells) of every region.
std::vector<double> region_sums(const Vec& r, int G, int R) {
  std::vector<double> reg(size_t((G / R) * (G / R)), 0.0);
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x) reg[size_t((y / R) * (G / R) + x / R)] += r[size_t(y * G + x)];
  return reg;
}

TEST(LodAllocator, DepthOrderFillsTheMostRelevantRegionsFirst) {
  Rng rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const int R = 1 << rng.randint(1, 3), G = R * rng.randint(1, 6);
    const int64_t regions = int64_t(G / R) * (G / R), cells = int64_t(G) * G;
    const int64_t N = regions + rng.randint(0, int(cells - regions));
    LodConfig c = config(R, regions, cells, LodPolicy::Relevance, N);
    c.order = LodOrder::Depth;
    const LodAllocator a(c, G);
    const int top = a.levels() - 1;
    const Vec r = relevance(rng, G);
    const ImageLod l = a.allocate(r.data(), uint64_t(trial));
    check_invariants(a, l, false);
    // In the order of region relevance (ties: raster), the levels read top, ..., top, x, 0, ..., 0.
    const std::vector<double> reg = region_sums(r, G, R);
    std::vector<int32_t> order(reg.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return reg[size_t(x)] > reg[size_t(y)]; });
    size_t i = 0;
    while (i < order.size() && l.level[size_t(order[i])] == top) ++i;
    if (i < order.size()) ++i;  // the one partly upgraded region (or the first left at 0)
    for (; i < order.size(); ++i) EXPECT_EQ(l.level[size_t(order[i])], 0) << "trial " << trial;
    // The next upgrade in the order did not fit.
    const int64_t T = int64_t(l.tokens.size());
    for (int32_t reg_id : order)
      if (l.level[size_t(reg_id)] < top) {
        const int lv = l.level[size_t(reg_id)];
        EXPECT_GT(T + (int64_t(3) << (2 * lv)), N) << "trial " << trial;
        break;
      }
    // The random policy spends the same tokens; uniform is the rounds allocation.
    LodConfig cr = c;
    cr.policy = LodPolicy::Random;
    const ImageLod lr = LodAllocator(cr, G).allocate(r.data(), uint64_t(trial));
    check_invariants(LodAllocator(cr, G), lr, false);
    EXPECT_EQ(lr.tokens.size(), l.tokens.size());
    LodConfig cu = c, cu_rounds = config(R, regions, cells, LodPolicy::Uniform, N);
    cu.policy = LodPolicy::Uniform;
    EXPECT_EQ(LodAllocator(cu, G).allocate(r.data(), 1).level, LodAllocator(cu_rounds, G).allocate(r.data(), 1).level);
  }
  // By hand: 4 regions of 4 x 4 cells (levels of 1, 4, 16 tokens), budget 4 + 15 + 3 = 22:
  // the most relevant region at level 2, the second at level 1, the others at level 0.
  LodConfig c = config(4, 4, 64, LodPolicy::Relevance, 22);
  c.order = LodOrder::Depth;
  Vec r(64, 0.1);
  for (int y = 4; y < 8; ++y)
    for (int x = 0; x < 4; ++x) r[size_t(y * 8 + x)] = 0.9;  // region 2
  for (int y = 0; y < 4; ++y)
    for (int x = 4; x < 8; ++x) r[size_t(y * 8 + x)] = 0.5;  // region 1
  const ImageLod l = LodAllocator(c, 8).allocate(r.data(), 0);
  EXPECT_EQ(l.level, (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_EQ(l.tokens.size(), 22u);
  c.order = LodOrder::Rounds;  // rounds: every region at level 1 first (16 tokens), then one upgrade of 12 does not fit
  EXPECT_EQ(LodAllocator(c, 8).allocate(r.data(), 0).level, (std::vector<int32_t>{1, 1, 1, 1}));
}

TEST(LodAllocator, ExplorationTakesTheRandomOrder) {
  Rng rng(11);
  const Vec r = relevance(rng, 16);
  for (LodOrder o : {LodOrder::Rounds, LodOrder::Depth}) {
    LodConfig c = config(4, 16, 256, LodPolicy::Relevance, 46), cr = c;
    c.order = cr.order = o;
    cr.policy = LodPolicy::Random;
    const LodAllocator rel(c, 16), rnd(cr, 16);
    int explored = 0;
    for (uint64_t s = 0; s < 200; ++s) {
      EXPECT_EQ(rel.allocate(r.data(), s, {0.0, 0}).level, rel.allocate(r.data(), s).level);
      EXPECT_EQ(rel.allocate(r.data(), s, {1.0, 0}).level, rnd.allocate(r.data(), s).level);
      const ImageLod h = rel.allocate(r.data(), s, {0.5, 0});
      EXPECT_EQ(h.tokens.size(), rel.allocate(r.data(), s).tokens.size());
      explored += h.level != rel.allocate(r.data(), s).level;
      EXPECT_EQ(h.level, rel.allocate(r.data(), s, {0.5, 0}).level);  // deterministic
    }
    EXPECT_GT(explored, 60);  // about half of the draws (a random order rarely matches the relevance's)
    EXPECT_LT(explored, 140);
    // Uniform and random do not explore.
    EXPECT_EQ(rnd.allocate(r.data(), 5, {1.0, 0}).level, rnd.allocate(r.data(), 5).level);
    // A step's budget replaces the configured one.
    EXPECT_EQ(rel.allocate(r.data(), 7, {0.0, 100}).budget, 100);
  }
  // The schedules: exploration linear from explore at step 1 to 0 at explore_until x
  // steps; the budget from max_tokens at step 1 to the fixed budget at anneal x steps.
  LodConfig c;
  c.explore = 0.8, c.explore_until = 0.5, c.max_tokens = 256, c.fixed_budget = 31, c.anneal = 0.25;
  EXPECT_DOUBLE_EQ(c.step_at(1, 100).explore, 0.8);
  EXPECT_DOUBLE_EQ(c.step_at(26, 100).explore, 0.8 * (1 - 25.0 / 49.0));
  EXPECT_DOUBLE_EQ(c.step_at(49, 100).explore, 0.8 * (1 - 48.0 / 49.0));
  EXPECT_EQ(c.step_at(50, 100).explore, 0.0);
  EXPECT_EQ(c.step_at(100, 100).explore, 0.0);
  EXPECT_EQ(c.step_at(1, 100).budget, 256);
  EXPECT_EQ(c.step_at(13, 100).budget, 31 + std::llround(225 * (1 - 12.0 / 24.0)));
  EXPECT_EQ(c.step_at(25, 100).budget, 31);
  EXPECT_EQ(c.step_at(90, 100).budget, 31);
  // With anneal_from: full detail up to step anneal_from x steps, then the same fall.
  c.anneal_from = 0.1;
  EXPECT_EQ(c.step_at(1, 100).budget, 256);
  EXPECT_EQ(c.step_at(10, 100).budget, 256);
  EXPECT_EQ(c.step_at(16, 100).budget, 31 + std::llround(225 * (1 - 6.0 / 15.0)));
  EXPECT_EQ(c.step_at(25, 100).budget, 31);
  EXPECT_DOUBLE_EQ(c.step_at(26, 100).explore, 0.8 * (1 - 25.0 / 49.0));  // exploration unchanged
  c.explore = 0, c.anneal = 0, c.anneal_from = 0;
  EXPECT_EQ(c.step_at(1, 100).explore, 0.0);
  EXPECT_EQ(c.step_at(1, 100).budget, 0);
}

// lod.gate=soft: the steps whose annealed budget lies strictly between max_tokens and the
// budget are soft (policy relevance only); a soft allocation emits every region at its
// finest level, with mix 1 on the floor(k) regions of highest mean relevance, the
// fraction of k on the next, 0 elsewhere, k = (budget - regions) / (R^2 - 1), and share =
// softmax(rho / tau) (the surrogate's).
TEST(LodAllocator, SoftStepsShareTheBudgetsDetailByRelevance) {
  LodConfig c = config(4, 16, 256, LodPolicy::Relevance, 31);
  c.gate = LodGate::Soft, c.anneal_from = 0.1, c.anneal = 0.25, c.soft_temperature = 0.1;
  EXPECT_FALSE(c.step_at(10, 100).soft);  // full detail
  EXPECT_TRUE(c.step_at(11, 100).soft);
  EXPECT_TRUE(c.step_at(24, 100).soft);
  EXPECT_FALSE(c.step_at(25, 100).soft);  // at the budget: hard
  LodConfig u = c, d = c;
  u.policy = LodPolicy::Uniform, d.gate = LodGate::Detail;
  EXPECT_FALSE(u.step_at(16, 100).soft);
  EXPECT_FALSE(d.step_at(16, 100).soft);
  Rng rng(12);
  const Vec r = relevance(rng, 16);
  const LodAllocator a(c, 16);
  const ImageLod h = a.allocate(r.data(), 3, c.step_at(16, 100));
  EXPECT_EQ(h.budget, c.step_at(16, 100).budget);
  EXPECT_EQ(h.tokens.size(), 256u);
  EXPECT_EQ(h.per_level, (std::vector<int64_t>{0, 0, 16}));
  EXPECT_DOUBLE_EQ(h.k, double(h.budget - 16) / 15.0);
  ASSERT_EQ(h.mix.size(), 16u);
  std::vector<double> rho(16, 0.0), e(16);
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) rho[size_t((y / 4) * 4 + x / 4)] += r[size_t(y * 16 + x)] / 16.0;
  double z = 0;
  for (size_t j = 0; j < 16; ++j) z += e[j] = std::exp(rho[j] / 0.1);
  std::vector<double> sorted = rho;
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t j = 0; j < 16; ++j) {
    EXPECT_NEAR(h.share[j], e[j] / z, 1e-12);
    const auto rank = double(std::find(sorted.begin(), sorted.end(), rho[j]) - sorted.begin());  // distinct maps
    EXPECT_NEAR(h.mix[j], std::clamp(h.k - rank, 0.0, 1.0), 1e-12) << "rank " << rank;
  }
  EXPECT_TRUE(a.allocate(r.data(), 3, c.step_at(30, 100)).mix.empty());  // a hard step
}

}  // namespace
}  // namespace vlm::test

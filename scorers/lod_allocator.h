// The level-of-detail (LOD) rule: how many visual tokens each region of an image gets.
// Discrete, on the host, without gradient (the gradient reaches the relevance through
// the gate of scorers/lod_tokens.h).
//
// The G x G grid (row-major cells) is tiled by R x R regions, numbered in raster order.
// A region at level l (0 <= l <= log2 R) emits 4^l tokens: its cells average-pooled in
// squares of side R / 2^l, in raster order of the squares.
// Budget of image i: lod.budget=N gives N; lod.budget=relevance gives
//   N_i = min_tokens + round((max_tokens - min_tokens) * mean(r_i))   (r in (0,1)).
// Allocation: every region starts at level 0 (so N_i >= number of regions). Regions are
// visited in an order (policy relevance: region relevance = mean r over its cells,
// descending, ties in raster order; uniform: raster order; random: a permutation drawn
// from the seed) and upgraded one level at a time (from l to l+1 costs 4^(l+1) - 4^l
// tokens); the first upgrade that does not fit the budget ends the allocation. lod.order
// says which upgrade comes next:
//  - rounds (default): round l upgrades every region from level l to l+1, in the order,
//    before round l+1 begins (detail spread evenly, the most relevant regions first);
//  - depth: each region in the order is upgraded to the finest level before the next
//    one starts (detail concentrated on the most relevant regions). Policy uniform
//    always allocates in rounds: the same detail everywhere is what it stands for.
// Training schedules (LodConfig::step_at): allocate(r, seed, step) takes the random
// policy's order with probability step.explore (policy relevance only; drawn from the
// seed), and step.budget (when > 0) as every image's budget. A soft step (step.soft,
// lod.gate=soft) emits every region at its finest level and shares the detail the budget
// buys by relevance (soft_mix): no exploration, and T_i = G*G.
// Hence:
//  - the tokens emitted T_i <= N_i, and T_i > N_i - (cost of the refused upgrade);
//  - a region never gets fewer tokens than a less relevant one (policy relevance), and a
//    larger budget never gives fewer tokens;
//  - for one order kind, T_i depends only on N_i, not on the policy (the sequence of
//    upgrade costs does not depend on which region is upgraded), so the baselines spend
//    exactly the tokens of the relevance policy (uniform under lod.order=depth: the
//    tokens of rounds, which may differ by less than one upgrade);
//  - deterministic: the same r (and seed) give the same allocation.
#pragma once
#include <cstdint>
#include <vector>

#include "scorers/options.h"

namespace vlm {

// One emitted token: the square of cells [y0, y0+side) x [x0, x0+side) of `region`.
struct LodToken {
  int32_t region = 0, level = 0;
  int32_t y0 = 0, x0 = 0, side = 0;
};

struct ImageLod {
  int64_t budget = 0;              // N_i
  std::vector<int32_t> level;      // per region (raster order)
  std::vector<LodToken> tokens;    // T_i tokens, raster order of regions, then of squares
  std::vector<int64_t> per_level;  // regions at each level (levels() entries)
  // Soft steps only (empty otherwise; soft_mix): the share of the detail of each region,
  // and the softmax it comes from.
  std::vector<double> mix, share;
  double k = 0, tau = 0;  // the regions' worth of detail shared; the softmax's temperature
};

// Soft detail (docs/scorers.md, "Soft detail (`lod.gate=soft`)"): with rho_j the mean of r[G*G] over region j
// (R x R cells), mix_j, the weight of region j's detail over its level-0 token
// (scorers/lod_tokens.h), is hard: 1 for the floor(k) regions of highest rho (ties in
// raster order), k - floor(k) for the next, 0 for the others; its gradient is that of
// the soft surrogate k share_j with share = softmax(rho / tau) over the regions (straight
// through). Sets lod.mix, lod.share, lod.k, lod.tau.
void soft_mix(const double* r, int G, int R, double k, double tau, ImageLod& lod);

class LodAllocator {
 public:
  // `G` the grid side; `cfg` validated (ScorerOptions::validate).
  LodAllocator(const LodConfig& cfg, int G);

  int grid() const { return G_; }
  int region() const { return cfg_.region; }
  int levels() const { return cfg_.levels(); }
  int64_t regions() const { return int64_t(G_ / cfg_.region) * (G_ / cfg_.region); }
  const LodConfig& config() const { return cfg_; }

  // N_i for an image of mean relevance `mean_r`.
  int64_t budget(double mean_r) const;
  // Allocation of one image from its relevance r[G*G]; `seed` is used by policy random
  // and by exploration only (the caller derives it from the run seed, the step and the
  // image); `step` the training schedule's (none outside training).
  ImageLod allocate(const double* r, uint64_t seed, const LodConfig::Step& step = {}) const;
  ImageLod allocate(const float* r, uint64_t seed, const LodConfig::Step& step = {}) const;

 private:
  int64_t upgrade_regions(const double* r, uint64_t seed, const LodConfig::Step& step, ImageLod& out) const;
  LodConfig cfg_;
  int G_;
};

}  // namespace vlm

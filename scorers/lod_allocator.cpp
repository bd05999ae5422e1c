// The LOD allocation (scorers/lod_allocator.h): budgets, region order and upgrade rounds.
#include "scorers/lod_allocator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "base/error.h"

namespace vlm {

LodAllocator::LodAllocator(const LodConfig& cfg, int G) : cfg_(cfg), G_(G) {
  VLM_ASSERT(cfg.region >= 1 && G % cfg.region == 0, "LodAllocator: region ", cfg.region, " for G ", G,
             " (validate the options first)");
}

int64_t LodAllocator::budget(double mean_r) const {
  if (cfg_.fixed_budget > 0) return cfg_.fixed_budget;
  const double m = std::clamp(mean_r, 0.0, 1.0);
  const int64_t n = cfg_.min_tokens + int64_t(std::llround(double(cfg_.max_tokens - cfg_.min_tokens) * m));
  return std::clamp(n, cfg_.min_tokens, cfg_.max_tokens);
}

namespace {

// The mean relevance of each R x R region of r[G*G], regions in raster order.
std::vector<double> region_means(const double* r, int G, int R) {
  const int RG = G / R;
  std::vector<double> m(size_t(RG) * RG, 0.0);
  for (int y = 0; y < G; ++y)
    for (int x = 0; x < G; ++x) m[size_t((y / R) * RG + x / R)] += r[int64_t(y) * G + x] / double(R * R);
  return m;
}

// The regions by descending relevance, ties in raster order.
std::vector<int32_t> by_relevance(const std::vector<double>& rel) {
  std::vector<int32_t> order(rel.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return rel[size_t(a)] > rel[size_t(b)]; });
  return order;
}

}  // namespace

void soft_mix(const double* r, int G, int R, double k, double tau, ImageLod& lod) {
  const std::vector<double> rho = region_means(r, G, R);
  const double top = *std::max_element(rho.begin(), rho.end());
  double sum = 0;
  lod.share.resize(rho.size()), lod.mix.assign(rho.size(), 0.0);
  for (size_t j = 0; j < rho.size(); ++j) sum += lod.share[j] = std::exp((rho[j] - top) / tau);
  for (double& s : lod.share) s /= sum;
  const std::vector<int32_t> order = by_relevance(rho);
  double left = k;  // the most relevant regions first, each at most 1
  for (size_t i = 0; i < order.size() && left > 0; ++i) lod.mix[size_t(order[i])] = std::min(1.0, left), left -= 1.0;
  lod.k = k, lod.tau = tau;
}

ImageLod LodAllocator::allocate(const float* r, uint64_t seed, const LodConfig::Step& step) const {
  std::vector<double> d(r, r + int64_t(G_) * G_);
  return allocate(d.data(), seed, step);
}

// The levels of a hard allocation (the order and the rounds of the header); returns the
// tokens they emit.
int64_t LodAllocator::upgrade_regions(const double* r, uint64_t seed, const LodConfig::Step& step,
                                      ImageLod& out) const {
  const int L = levels();
  const int64_t nreg = regions();
  std::vector<int32_t> order(static_cast<size_t>(nreg));
  std::iota(order.begin(), order.end(), 0);
  // Exploration: with probability step.explore the relevance policy takes the random order.
  const bool explored = cfg_.policy == LodPolicy::Relevance && step.explore > 0 &&
                        double(std::mt19937_64(seed ^ 0xA5A5F00DC0FFEE11ull)() >> 11) * 0x1.0p-53 < step.explore;
  if (cfg_.policy == LodPolicy::Relevance && !explored) {
    order = by_relevance(region_means(r, G_, cfg_.region));
  } else if (cfg_.policy != LodPolicy::Uniform) {
    std::mt19937_64 g(seed);  // Fisher-Yates with g() % n: the same on every platform
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[size_t(g() % i)]);
  }
  int64_t spent = nreg;
  // One upgrade of region `reg` from level l; false (and the allocation ends) when it does not fit.
  auto upgrade = [&](int32_t reg, int l) {
    const int64_t cost = (int64_t(1) << (2 * (l + 1))) - (int64_t(1) << (2 * l));
    if (spent + cost > out.budget) return false;
    out.level[size_t(reg)] = l + 1;
    spent += cost;
    return true;
  };
  bool fits = true;
  if (cfg_.order == LodOrder::Depth && cfg_.policy != LodPolicy::Uniform) {
    for (size_t i = 0; i < order.size() && fits; ++i)
      for (int l = 0; l + 1 < L && fits; ++l) fits = upgrade(order[i], l);
  } else {
    for (int l = 0; l + 1 < L && fits; ++l)
      for (size_t i = 0; i < order.size() && fits; ++i) fits = upgrade(order[i], l);
  }
  return spent;
}

ImageLod LodAllocator::allocate(const double* r, uint64_t seed, const LodConfig::Step& step) const {
  const int R = cfg_.region, RG = G_ / R, L = levels();
  const int64_t nreg = regions(), cells = int64_t(G_) * G_;
  ImageLod out;
  double mean = 0;
  for (int64_t i = 0; i < cells; ++i) mean += r[i];
  out.budget = step.budget > 0 ? step.budget : budget(mean / double(cells));
  out.level.assign(size_t(nreg), 0);
  int64_t spent = nreg;
  if (step.soft) {  // every region at its finest level; the budget's worth of detail shared by relevance
    const int64_t full = int64_t(R) * R;
    out.level.assign(size_t(nreg), L - 1);
    spent = nreg * full;
    soft_mix(r, G_, R, full > 1 ? double(out.budget - nreg) / double(full - 1) : 0.0, cfg_.soft_temperature, out);
  } else {
    spent = upgrade_regions(r, seed, step, out);
  }

  out.per_level.assign(size_t(L), 0);
  out.tokens.reserve(size_t(spent));
  for (int32_t reg = 0; reg < int32_t(nreg); ++reg) {
    const int l = out.level[size_t(reg)], n = 1 << l, side = R >> l;
    ++out.per_level[size_t(l)];
    const int ry = (reg / RG) * R, rx = (reg % RG) * R;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) out.tokens.push_back({reg, l, ry + i * side, rx + j * side, side});
  }
  VLM_ASSERT(int64_t(out.tokens.size()) == spent, "LOD token count");
  return out;
}

}  // namespace vlm

// Registration, reading and validation of the scorer and LOD options (scorers/options.h).
#include "scorers/options.h"

#include <charconv>
#include <cmath>

#include "base/config.h"
#include "base/error.h"
#include "scorers/placement/placement.h"

namespace vlm {

const char* policy_name(LodPolicy p) {
  switch (p) {
    case LodPolicy::Relevance: return "relevance";
    case LodPolicy::Uniform: return "uniform";
    case LodPolicy::Random: return "random";
  }
  return "?";
}

namespace {

// 1 at step 1, falling linearly to 0 at step end = until x steps, 0 from there on.
double falling(double until, int64_t step, int64_t steps) {
  const double end = until * double(steps);
  if (end <= 1 || double(step) >= end) return 0.0;
  return 1.0 - double(step - 1) / (end - 1.0);
}

}  // namespace

LodConfig::Step LodConfig::step_at(int64_t step, int64_t steps) const {
  Step s;
  s.explore = explore > 0 ? explore * falling(explore_until, step, steps) : 0.0;
  if (anneal > 0 && fixed_budget > 0)
    s.budget = fixed_budget + int64_t(std::llround(double(max_tokens - fixed_budget) * falling(anneal, step, steps)));
  return s;
}

int LodConfig::levels() const {
  int l = 1;
  for (int r = region; r > 1; r >>= 1) ++l;
  return l;
}

namespace {

// "<option>=<value>", or "<list>: <value>" when the caller names the list it came from.
template <class T>
std::string named(const std::map<std::string, std::string>& as, const std::string& option, const T& value) {
  const auto it = as.find(option);
  return it == as.end() ? cat(option, "=", value) : cat(it->second, ": ", value);
}

}  // namespace

void ScorerOptions::validate(int G, int tp, const std::map<std::string, std::string>& as) const {
  check_placement(scorers.placement, tp, scorers.hidden, named(as, "scorers.placement", scorers.placement));
  const int R = lod.region;
  VLM_REQUIRE(R >= 1 && (R & (R - 1)) == 0, "lod.region=", R, ": expected a power of two (regions of R x R cells)");
  VLM_REQUIRE(G >= 1 && G % R == 0, "lod.region=", R, " does not divide the grid G = ", G,
              " = vision.image_size / vision.patch (the regions must tile the G x G grid)");
  const int64_t regions = lod.regions(G), cells = int64_t(G) * G;
  VLM_REQUIRE(lod.min_tokens <= lod.max_tokens, named(as, "lod.min_tokens", lod.min_tokens),
              " is above lod.max_tokens=", lod.max_tokens);
  VLM_REQUIRE(lod.min_tokens >= regions, named(as, "lod.min_tokens", lod.min_tokens),
              " is below the number of regions (G/R)^2 = (", G, "/", R, ")^2 = ", regions,
              " (every region emits at least one token)");
  VLM_REQUIRE(lod.max_tokens <= cells, named(as, "lod.max_tokens", lod.max_tokens), " is above G*G = ", cells,
              " (every region at its finest level)");
  VLM_REQUIRE(lod.fixed_budget == 0 || (lod.fixed_budget >= lod.min_tokens && lod.fixed_budget <= lod.max_tokens),
              named(as, "lod.budget", lod.fixed_budget),
              ": expected 'relevance' or an integer in [lod.min_tokens, lod.max_tokens] = [", lod.min_tokens, ", ",
              lod.max_tokens, "]");
  VLM_REQUIRE(lod.explore >= 0 && lod.explore <= 1, "lod.explore=", lod.explore, ": expected a probability in [0, 1]");
  VLM_REQUIRE(lod.explore_until >= 0 && lod.explore_until <= 1, "lod.explore_until=", lod.explore_until,
              ": expected a fraction of the training steps in [0, 1]");
  VLM_REQUIRE(lod.anneal >= 0 && lod.anneal <= 1, "lod.anneal=", lod.anneal,
              ": expected a fraction of the training steps in [0, 1]");
  VLM_REQUIRE(lod.anneal == 0 || lod.fixed_budget > 0, "lod.anneal=", lod.anneal,
              " anneals towards a fixed budget: set lod.budget to a number of tokens");
  VLM_REQUIRE(scorers.k >= 1 && scorers.k % 2 == 1 && scorers.k <= G, "scorers.k=", scorers.k,
              ": expected an odd window size in [1, G = ", G, "]");
}

void register_scorer_options(Config& cfg) {
  cfg.add_int("lod.region", 4, "LOD region side R in grid cells (a power of two dividing G)", 1, 1 << 14);
  cfg.add_int("lod.min_tokens", 64, "fewest visual tokens per image (at least the number of regions (G/R)^2)", 1,
              int64_t(1) << 30);
  cfg.add_int("lod.max_tokens", 400, "most visual tokens per image (at most G*G)", 1, int64_t(1) << 30);
  cfg.add_string("lod.budget", "relevance",
                 "tokens per image: 'relevance' (grows with the image's mean relevance) or a fixed integer N");
  cfg.add_choice("lod.policy", "relevance", {"relevance", "uniform", "random"},
                 "order of region upgrades: by relevance, or the baselines uniform (raster) and random");
  cfg.add_choice("lod.order", "rounds", {"rounds", "depth"},
                 "upgrade order: rounds (every region one level before any the next) or depth (each region to the "
                 "finest level in turn; policy uniform always uses rounds)");
  cfg.add_choice("lod.gate", "token", {"token", "detail"},
                 "relevance gradient: token (the straight-through gate scales the token) or detail (it scales the "
                 "token's detail over its coarser level: the first-order value of the detail)");
  cfg.add_float("lod.explore", 0.0, "training: probability that an image's allocation takes a random region order "
                "(policy relevance), falling linearly to 0 at lod.explore_until x train.steps", 0.0, 1.0);
  cfg.add_float("lod.explore_until", 0.5, "training: fraction of the steps after which lod.explore is 0", 0.0, 1.0);
  cfg.add_float("lod.anneal", 0.0, "training: fraction of the steps over which the budget falls linearly from "
                "lod.max_tokens to lod.budget (a fixed budget; 0 = no annealing)", 0.0, 1.0);
  cfg.add_choice("scorers.placement", placement_names().front(), placement_names(),
                 "where the scorers run in the TP group (docs/scorers.md)");
  cfg.add_int("scorers.hidden", 64, "hidden width of the scorer MLPs, projections and balancer", 1, 1 << 16);
  cfg.add_int("scorers.k", 3, "centre-surround window of the perspectival scorer (odd, cells)", 1, 1 << 14);
}

ScorerOptions read_scorer_options(const Config& cfg) {
  ScorerOptions o;
  o.lod.region = int(cfg.get_int("lod.region"));
  o.lod.min_tokens = cfg.get_int("lod.min_tokens");
  o.lod.max_tokens = cfg.get_int("lod.max_tokens");
  const std::string& b = cfg.get_string("lod.budget");
  if (b != "relevance") {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(b.data(), b.data() + b.size(), n);
    VLM_REQUIRE(ec == std::errc() && p == b.data() + b.size() && n > 0, "lod.budget=", b,
                ": expected 'relevance' or a positive integer");
    o.lod.fixed_budget = n;
  }
  const std::string& pol = cfg.get_string("lod.policy");
  o.lod.policy = pol == "uniform" ? LodPolicy::Uniform : pol == "random" ? LodPolicy::Random : LodPolicy::Relevance;
  o.lod.order = cfg.get_string("lod.order") == "depth" ? LodOrder::Depth : LodOrder::Rounds;
  o.lod.gate = cfg.get_string("lod.gate") == "detail" ? LodGate::Detail : LodGate::Token;
  o.lod.explore = cfg.get_float("lod.explore");
  o.lod.explore_until = cfg.get_float("lod.explore_until");
  o.lod.anneal = cfg.get_float("lod.anneal");
  o.scorers.placement = cfg.get_string("scorers.placement");
  o.scorers.hidden = cfg.get_int("scorers.hidden");
  o.scorers.k = int(cfg.get_int("scorers.k"));
  return o;
}

}  // namespace vlm

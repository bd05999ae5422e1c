// The declaration and validation of the scorer and LOD options (scorers/options.h).
#include "scorers/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>

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

// 1 up to step start = max(1, from x steps), falling linearly to 0 at step end =
// until x steps, 0 from there on.
double falling(double from, double until, int64_t step, int64_t steps) {
  const double start = std::max(1.0, from * double(steps)), end = until * double(steps);
  if (end <= start || double(step) >= end) return 0.0;
  if (double(step) <= start) return 1.0;
  return 1.0 - (double(step) - start) / (end - start);
}

}  // namespace

LodConfig::Step LodConfig::step_at(int64_t step, int64_t steps) const {
  Step s;
  s.explore = explore > 0 ? explore * falling(0, explore_until, step, steps) : 0.0;
  if (anneal > 0 && fixed_budget > 0)
    s.budget = fixed_budget +
               int64_t(std::llround(double(max_tokens - fixed_budget) * falling(anneal_from, anneal, step, steps)));
  s.soft = gate == LodGate::Soft && policy == LodPolicy::Relevance && s.budget > fixed_budget && s.budget < max_tokens;
  return s;
}

int LodConfig::levels() const {
  int l = 1;
  for (int r = region; r > 1; r >>= 1) ++l;
  return l;
}

namespace {

// "<option>=<value>" of the option bound to `field`, or "<list>: <value>" when the caller
// names the list it came from.
template <class F, class T>
std::string named(const std::map<std::string, std::string>& as, F field, const T& value) {
  const std::string& option = scorer_options().name_of(field);
  const auto it = as.find(option);
  return it == as.end() ? cat(option, "=", value) : cat(it->second, ": ", value);
}

template <class V>
NestedField<ScorerOptions, LodConfig, V> lod_field(V LodConfig::*field) {
  return at(&ScorerOptions::lod, field);
}

}  // namespace

void ScorerOptions::validate(int G, int tp, const std::map<std::string, std::string>& as) const {
  check_placement(scorers.placement, tp, scorers.hidden,
                  named(as, at(&ScorerOptions::scorers, &ScorerConfig::placement), scorers.placement));
  const int R = lod.region;
  VLM_REQUIRE(R >= 1 && (R & (R - 1)) == 0, "lod.region=", R, ": expected a power of two (regions of R x R cells)");
  VLM_REQUIRE(G >= 1 && G % R == 0, "lod.region=", R, " does not divide the grid G = ", G,
              " = vision.image_size / vision.patch (the regions must tile the G x G grid)");
  const int64_t regions = lod.regions(G), cells = int64_t(G) * G;
  VLM_REQUIRE(lod.min_tokens <= lod.max_tokens, named(as, lod_field(&LodConfig::min_tokens), lod.min_tokens),
              " is above lod.max_tokens=", lod.max_tokens);
  VLM_REQUIRE(lod.min_tokens >= regions, named(as, lod_field(&LodConfig::min_tokens), lod.min_tokens),
              " is below the number of regions (G/R)^2 = (", G, "/", R, ")^2 = ", regions,
              " (every region emits at least one token)");
  VLM_REQUIRE(lod.max_tokens <= cells, named(as, lod_field(&LodConfig::max_tokens), lod.max_tokens),
              " is above G*G = ", cells, " (every region at its finest level)");
  VLM_REQUIRE(lod.fixed_budget == 0 || (lod.fixed_budget >= lod.min_tokens && lod.fixed_budget <= lod.max_tokens),
              named(as, lod_field(&LodConfig::fixed_budget), lod.fixed_budget),
              ": expected 'relevance' or an integer in [lod.min_tokens, lod.max_tokens] = [", lod.min_tokens, ", ",
              lod.max_tokens, "]");
  VLM_REQUIRE(lod.explore >= 0 && lod.explore <= 1, "lod.explore=", lod.explore, ": expected a probability in [0, 1]");
  VLM_REQUIRE(lod.explore_until >= 0 && lod.explore_until <= 1, "lod.explore_until=", lod.explore_until,
              ": expected a fraction of the training steps in [0, 1]");
  VLM_REQUIRE(lod.anneal >= 0 && lod.anneal <= 1, "lod.anneal=", lod.anneal,
              ": expected a fraction of the training steps in [0, 1]");
  VLM_REQUIRE(lod.anneal == 0 || lod.fixed_budget > 0, "lod.anneal=", lod.anneal,
              " anneals towards a fixed budget: set lod.budget to a number of tokens");
  VLM_REQUIRE(lod.anneal_from == 0 || lod.anneal_from < lod.anneal, "lod.anneal_from=", lod.anneal_from,
              ": expected a fraction of the steps below lod.anneal=", lod.anneal, " (where the annealing ends)");
  VLM_REQUIRE(lod.gate != LodGate::Soft || lod.max_tokens == cells,
              named(as, lod_field(&LodConfig::max_tokens), lod.max_tokens), " with lod.gate=soft: expected G*G = ",
              cells, " (the soft steps give every region its full detail, mixed in by the relevance)");
  VLM_REQUIRE(lod.soft_temperature > 0, "lod.soft_temperature=", lod.soft_temperature, ": expected > 0");
  VLM_REQUIRE(scorers.k >= 1 && scorers.k % 2 == 1 && scorers.k <= G, "scorers.k=", scorers.k,
              ": expected an odd window size in [1, G = ", G, "]");
}

const OptionSet<ScorerOptions>& scorer_options() {
  static const OptionSet<ScorerOptions> set([](OptionSet<ScorerOptions>& s) {
    s.option("lod.region", lod_field(&LodConfig::region),
             "LOD region side R in grid cells (a power of two dividing G)")
        .range(1, 1 << 14);
    s.option("lod.min_tokens", lod_field(&LodConfig::min_tokens),
             "fewest visual tokens per image (at least the number of regions (G/R)^2)")
        .range(1, int64_t(1) << 30);
    s.option("lod.max_tokens", lod_field(&LodConfig::max_tokens),
             "most visual tokens per image (at most G*G)")
        .range(1, int64_t(1) << 30);
    s.option("lod.budget", lod_field(&LodConfig::fixed_budget),
             "tokens per image: 'relevance' (grows with the image's mean relevance) or a fixed integer N")
        .parse("relevance", [](const std::string& b) -> int64_t {
          if (b == "relevance") return 0;
          int64_t n = 0;
          auto [p, ec] = std::from_chars(b.data(), b.data() + b.size(), n);
          VLM_REQUIRE(ec == std::errc() && p == b.data() + b.size() && n > 0, "lod.budget=", b,
                      ": expected 'relevance' or a positive integer");
          return n;
        });
    s.option("lod.policy", lod_field(&LodConfig::policy),
             "order of region upgrades: by relevance, or the baselines uniform (raster) and random")
        .choices(choices_of(policy_name, {LodPolicy::Relevance, LodPolicy::Uniform, LodPolicy::Random}));
    s.option("lod.order", lod_field(&LodConfig::order),
             "upgrade order: rounds (every region one level before any the next) or depth (each region to the "
             "finest level in turn; policy uniform always uses rounds)")
        .choices({{"rounds", LodOrder::Rounds}, {"depth", LodOrder::Depth}});
    s.option("lod.gate", lod_field(&LodConfig::gate),
             "relevance gradient: token (the straight-through gate scales the token), detail (it scales the "
             "token's detail over its coarser level: the first-order value of the detail) or soft (detail, and while "
             "lod.anneal lowers the budget, every region's detail mixed in by its relevance: docs/scorers.md)")
        .choices({{"token", LodGate::Token}, {"detail", LodGate::Detail}, {"soft", LodGate::Soft}});
    s.option("lod.soft_temperature", lod_field(&LodConfig::soft_temperature),
             "lod.gate=soft: temperature of the softmax over the regions' mean relevance that shares the detail")
        .range(1e-6, 1e6);
    s.option("lod.gate_full_detail", lod_field(&LodConfig::gate_full_detail),
             "training: whether an image at full detail (every region at the finest level) gives the relevance "
             "the gate's gradient (docs/scorers.md, \"The full-detail steps\")");
    s.option("lod.explore", lod_field(&LodConfig::explore),
             "training: probability that an image's allocation takes a random region order (policy relevance), "
             "falling linearly to 0 at lod.explore_until x train.steps")
        .range(0.0, 1.0);
    s.option("lod.explore_until", lod_field(&LodConfig::explore_until),
             "training: fraction of the steps after which lod.explore is 0")
        .range(0.0, 1.0);
    s.option("lod.anneal", lod_field(&LodConfig::anneal),
             "training: fraction of the steps over which the budget falls linearly from lod.max_tokens to "
             "lod.budget (a fixed budget; 0 = no annealing)")
        .range(0.0, 1.0);
    s.option("lod.anneal_from", lod_field(&LodConfig::anneal_from),
             "training: fraction of the steps at full detail (lod.max_tokens) before the annealing starts")
        .range(0.0, 1.0);
    s.option("scorers.placement", at(&ScorerOptions::scorers, &ScorerConfig::placement),
             "where the scorers run in the TP group (docs/scorers.md)")
        .one_of(placement_names());
    s.option("scorers.hidden", at(&ScorerOptions::scorers, &ScorerConfig::hidden),
             "hidden width of the scorer MLPs, projections and balancer")
        .range(1, 1 << 16);
    s.option("scorers.query_norm", at(&ScorerOptions::scorers, &ScorerConfig::query_norm),
             "RMS-normalise the query (the prompt's mean embedding) before the scorers and the balancer "
             "(docs/scorers.md, \"The query (`scorers.query_norm`)\")");
    s.option("scorers.k", at(&ScorerOptions::scorers, &ScorerConfig::k),
             "centre-surround window of the perspectival scorer (odd, cells)")
        .range(1, 1 << 14);
  });
  return set;
}

void register_scorer_options(Config& cfg) { scorer_options().add_to(cfg); }
ScorerOptions read_scorer_options(const Config& cfg) { return scorer_options().read(cfg); }

}  // namespace vlm

// The options of the scorers and of the level-of-detail (LOD) allocator, declared once
// under `lod.*` and `scorers.*` (scorer_options()) and read into plain structs. The LOD
// rule itself is written in scorers/lod_allocator.h; the placements in scorers/placement/.
//
// Invariants after validate(G, tp) (each failure is a UserError naming the option; this
// is the one place that checks them):
//   lod.region R: a power of two dividing G (the regions tile the G x G grid);
//   lod.min_tokens >= (G/R)^2 (every region starts at level 0, one token);
//   lod.min_tokens <= lod.max_tokens <= G*G (every region at its finest level);
//   lod.budget: "relevance" or an integer N in [min_tokens, max_tokens];
//   lod.explore, lod.explore_until, lod.anneal, lod.anneal_from: in [0, 1]; lod.anneal > 0
//   needs a fixed lod.budget, and lod.anneal_from is 0 or below lod.anneal;
//   scorers.k: odd, at most G (the centre-surround window);
//   scorers.placement: one of placement_names(), whose own rules hold (tp2: an even
//     parallel.tp and an even scorers.hidden; ScorerPlacement::check).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "base/options.h"

namespace vlm {

enum class LodPolicy { Relevance, Uniform, Random };
enum class LodOrder { Rounds, Depth };  // lod.order (scorers/lod_allocator.h)
enum class LodGate { Token, Detail, Soft };  // lod.gate (scorers/lod_tokens.h)
const char* policy_name(LodPolicy p);

struct LodConfig {
  int region = 4;             // R, cells per region side
  int64_t min_tokens = 64;    // per image
  int64_t max_tokens = 400;   // per image
  int64_t fixed_budget = 0;   // lod.budget=N: every image gets N; 0 = lod.budget=relevance
  LodPolicy policy = LodPolicy::Relevance;
  LodOrder order = LodOrder::Rounds;  // how the upgrades are ordered (lod_allocator.h)
  LodGate gate = LodGate::Token;      // what the relevance gradient measures (lod_tokens.h)
  // Training schedules (step_at; docs/scorers.md, "Learning where to look"):
  //  - exploration (policy relevance): an image's allocation takes the random policy's
  //    order with probability falling linearly from lod.explore at step 1 to 0 at step
  //    explore_until x steps (and staying 0);
  //  - annealing (a fixed lod.budget): the budget stays at lod.max_tokens up to step
  //    anneal_from x steps (at least step 1), then falls linearly to lod.budget at step
  //    anneal x steps (and stays there), so that early steps see the detail everywhere;
  //  - soft detail (lod.gate=soft, policy relevance): while the annealed budget is between
  //    lod.max_tokens and lod.budget (both excluded), the step is soft: every region keeps
  //    its full detail, mixed in by the relevance (scorers/lod_allocator.h soft_mix, at
  //    temperature soft_temperature) up to the regions' worth of detail the budget buys.
  double explore = 0, explore_until = 0.5, anneal = 0, anneal_from = 0;
  double soft_temperature = 0.1;
  // lod.gate_full_detail: whether an image at full detail (every region at the finest
  // level: the steps of lod.anneal_from, a budget of G*G) gives the relevance the gate's
  // gradient (scorers/lod_tokens.h). There no region's detail can be chosen, only
  // amplified, and which way the loss wants it amplified is the model's, not the question's.
  bool gate_full_detail = true;

  int levels() const;                                    // log2(R) + 1 (levels 0..log2 R)
  struct Step {
    double explore = 0;  // exploration probability
    int64_t budget = 0;  // the budget of every image (0: the configured rule)
    bool soft = false;   // soft detail (lod.gate=soft) at this budget
  };
  Step step_at(int64_t step, int64_t steps) const;
  int64_t regions(int G) const { return int64_t(G / region) * (G / region); }
};

struct ScorerConfig {
  int64_t hidden = 64;  // width of every scorer MLP, of the participatory projection and of the balancer
  int k = 3;            // centre-surround window of the perspectival scorer (k x k cells)
  std::string placement = "replicated";  // a name of scorers/placement/placement.h's table
  // scorers.query_norm: the query rows RMS-normalised (no gain) before the scorers and
  // the balancer read them (scorers/stage.h; docs/scorers.md, "The query (`scorers.query_norm`)").
  bool query_norm = false;
};

struct ScorerOptions {
  LodConfig lod;
  ScorerConfig scorers;
  // Throws UserError naming the option (see the invariants above): the placement's rules
  // first, then the LOD's. A refused value is named "<option>=<value>", or
  // "<as[option]>: <value>" for an option in `as`: a caller that set it from a list of
  // its own names that list ({"lod.max_tokens", "--budgets"}: "--budgets: 17"; vlm
  // ablate's rows).
  void validate(int G, int tp, const std::map<std::string, std::string>& as = {}) const;
};

// The declaration (base/options.h) of lod.region, lod.min_tokens, lod.max_tokens,
// lod.budget ("relevance" or a positive integer: fixed_budget), lod.policy, lod.order,
// lod.gate, lod.explore, lod.explore_until, lod.anneal, lod.anneal_from, scorers.placement,
// scorers.hidden, scorers.k.
const OptionSet<ScorerOptions>& scorer_options();
void register_scorer_options(Config& cfg);
// Reads them; does not validate (call validate with the grid and the TP size).
ScorerOptions read_scorer_options(const Config& cfg);

}  // namespace vlm

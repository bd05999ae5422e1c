// The table of scorer kinds and what every kind shares (scorers/scorer.h); each kind's
// forward and backward are in scorers/kind/.
#include "scorers/scorer.h"

#include <iterator>

#include "base/error.h"

namespace vlm {

// Each defined in its own file of scorers/kind/.
std::unique_ptr<Scorer> make_propositional_scorer(const ScorerDims& dims, Communicator* pair);
std::unique_ptr<Scorer> make_perspectival_scorer(const ScorerDims& dims, Communicator* pair);
std::unique_ptr<Scorer> make_participatory_scorer(const ScorerDims& dims, Communicator* pair);

namespace {

struct Kind {
  ScorerKind kind;
  const char* name;
  std::unique_ptr<Scorer> (*make)(const ScorerDims& dims, Communicator* pair);
};
// In ScorerKind order (the order of the balancer's maps and of the streams scorer.k).
const Kind kKinds[] = {{ScorerKind::Propositional, "propositional", make_propositional_scorer},
                       {ScorerKind::Perspectival, "perspectival", make_perspectival_scorer},
                       {ScorerKind::Participatory, "participatory", make_participatory_scorer}};
static_assert(std::size(kKinds) == kNumScorers, "one entry per ScorerKind");

const Kind& kind_of(ScorerKind k) {
  const Kind& e = kKinds[size_t(k)];
  VLM_ASSERT(e.kind == k, "scorer kind table out of order");
  return e;
}

}  // namespace

const char* scorer_name(ScorerKind k) { return kind_of(k).name; }

std::unique_ptr<Scorer> make_scorer(ScorerKind kind, const ScorerDims& dims, Communicator* pair) {
  return kind_of(kind).make(dims, pair);
}

std::vector<ParamSpec> scorer_param_specs(ScorerKind kind, const ScorerDims& dims) {
  return make_scorer(kind, dims)->param_specs();
}

std::string Scorer::param_name(const char* w) const { return cat("scorers.", scorer_name(kind_), ".", w); }

ParamSpec Scorer::spec(const char* w, Shape full, int split_dim, InitKind init, float sd) const {
  return param_spec(param_name(w), full, pair_ ? split_dim : -1, init, sd);
}

void Scorer::bind_param(const ParamTable& t, const char* w, Tensor& value, Tensor& grad) {
  const Param& p = t.get(param_name(w));
  params_.push_back(&p);
  value = p.value, grad = p.grad;
}

}  // namespace vlm

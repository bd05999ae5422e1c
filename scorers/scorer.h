// The relevance scorers: small networks that map the cell features F [B, G*G, d] and the
// texture array [B, 13, G*G] (channels first, cells row-major) to one logit per cell,
// s [B, G*G]. Three kinds, each a strategy of its own in scorers/kind/ (its formula,
// parameters, forward, backward and FLOPs there):
//   propositional (what is there):     a per-cell MLP of F and the texture
//   perspectival  (what stands out):   the same MLP on the centre-surround of F
//   participatory (what matters for the prompt): the features projected against the
//       projected query q [B, dq] (the caller gives the prompt's mean embedding, or the
//       learned default query: scorers/stage.h)
// Parameters: named "scorers.<kind>.<w>", replicated; split over a pair of ranks when
// `pair` is given (placement tp2: the hidden width in two, the first layers column-
// parallel, the output row-parallel, through nn/'s parallel linears and the region ops
// on the pair's communicator; both ranks of the pair end with the same s, dF and dq).
// Gradients (nn/context.h): parameter gradients accumulate; dF and dq ACCUMULATE too,
// since three scorers (and the balancer, for q) add into the same buffers.
// forward keeps views of F, tex and q for backward: they must stay unchanged until then.
// A new kind is one file in scorers/kind/, its line in the table of scorer.cpp and its
// ScorerKind (the step gives each kind a stream: scheduler/streams.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/texture_channels.h"
#include "nn/param_table.h"
#include "parallel/communicator.h"
#include "scorers/scratch.h"

namespace vlm {

enum class ScorerKind { Propositional = 0, Perspectival = 1, Participatory = 2 };
inline constexpr int kNumScorers = 3;
const char* scorer_name(ScorerKind k);  // "propositional", "perspectival", "participatory"

struct ScorerDims {
  int G = 32;           // grid side
  int64_t d = 768;      // cell feature width d_v
  int64_t hidden = 64;  // scorers.hidden
  int64_t dq = 768;     // query width (the backbone's d_model)
  int k = 3;            // scorers.k
  int64_t cells() const { return int64_t(G) * G; }
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  ScorerKind kind() const { return kind_; }

  // The parameter specs (split over the pair when there is one: the table is then made
  // with tp = 2 and the pair rank).
  virtual std::vector<ParamSpec> param_specs() const = 0;
  // Binds the parameter views (and builds what the kind needs on their device).
  virtual void bind(const ParamTable& t) = 0;
  // All parameters of this scorer (for the placements' gradient traffic).
  const std::vector<const Param*>& params() const { return params_; }

  // s [B,G*G] (overwrite) from F [B,G*G,d], tex [B,13,G*G], q [B,dq].
  virtual void forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor& q) = 0;
  // ds [B,G*G] -> parameter gradients +=, dF [B,G*G,d] +=, dq [B,dq] += (what reaches them).
  virtual void backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq) = 0;
  // Multiply-adds per image of the forward's products with weights, at the full hidden
  // width (model/work.h counts FLOPs from these: scorers/flops.h).
  virtual double forward_macs_per_image() const = 0;

 protected:
  Scorer(ScorerKind kind, const ScorerDims& dims, Communicator* pair) : kind_(kind), dims_(dims), pair_(pair) {}
  // "scorers.<kind>.<w>"
  std::string param_name(const char* w) const;
  // The spec of parameter w: split along split_dim over the pair when there is one (-1:
  // never), else replicated.
  ParamSpec spec(const char* w, Shape full, int split_dim, InitKind init, float sd = 0.f) const;
  // Binds parameter w's value and gradient (undefined when frozen) and lists it in params().
  void bind_param(const ParamTable& t, const char* w, Tensor& value, Tensor& grad);
  int64_t local_hidden() const { return pair_ ? dims_.hidden / pair_->size() : dims_.hidden; }

  ScorerKind kind_;
  ScorerDims dims_;
  Communicator* pair_ = nullptr;
  std::vector<const Param*> params_;
};

// The scorer of `kind`; `pair`: the 2-rank communicator it is split over (placement
// tp2), or null (the whole scorer here).
std::unique_ptr<Scorer> make_scorer(ScorerKind kind, const ScorerDims& dims, Communicator* pair = nullptr);
// The unsplit parameter specs of `kind` (make_scorer(kind, dims)->param_specs()).
std::vector<ParamSpec> scorer_param_specs(ScorerKind kind, const ScorerDims& dims);

}  // namespace vlm

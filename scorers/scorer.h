// The three relevance scorers: small networks that map the cell features F [B, G*G, d]
// and the texture array [B, 13, G*G] (channels first, cells row-major) to one logit per
// cell, s [B, G*G].
//   propositional (what is there):     s = w2 . GELU(W1f F + W1t tex + b1) + b2, per cell
//   perspectival  (what stands out):   the same MLP on X = F - mean_{k x k}(F) (centre-
//       surround; the neighbourhood of a cell is the k x k window around it clipped to
//       the grid, mean over the cells inside), plus the texture
//   participatory (what matters for the prompt): s = (W_f F) . (W_q q) / sqrt(hidden),
//       q [B, dq] the query (the caller gives the prompt's mean embedding, or the learned
//       default query: scorers/stage.h)
// Parameters (replicated), names "scorers.<kind>.<w>": w1f [h,d], w1t [h,13], b1 [h],
// w2 [1,h], b2 [1] (propositional, perspectival); wf [h,d], wq [h,dq] (participatory).
// The clipped box mean is separable, M = M_y (x) M_x with the 1-D clipped box mean
// [G, G] along each axis: two batched matmuls by the same fixed [G, G] matrix.
// Split over a pair of ranks (placement tp2, `pair` given): the hidden width is split in
// two, w1f/w1t/b1/wf/wq by rows (column-parallel), w2 by columns (row-parallel, b2 added
// once after the reduction), through nn/'s parallel linears and the region ops on the
// pair's communicator; both ranks of the pair end with the same s, dF and dq.
// Gradients (nn/context.h): parameter gradients accumulate; dF and dq ACCUMULATE too,
// since three scorers (and the balancer, for q) add into the same buffers.
// forward keeps views of F, tex and q for backward: they must stay unchanged until then.
#pragma once
#include <cstdint>
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

// `split`: the tp2 split above (the table is then made with tp = 2, the pair rank).
std::vector<ParamSpec> scorer_param_specs(ScorerKind kind, const ScorerDims& dims, bool split = false);

class Scorer {
 public:
  // `pair`: the 2-rank communicator of placement tp2, or null (the whole scorer here).
  Scorer(ScorerKind kind, const ScorerDims& dims, Communicator* pair = nullptr)
      : kind_(kind), dims_(dims), pair_(pair) {}
  ScorerKind kind() const { return kind_; }
  // Binds the parameter views (and builds the box-mean matrix on their device).
  void bind(const ParamTable& t);
  // All parameters of this scorer (for the placements' gradient traffic).
  const std::vector<const Param*>& params() const { return params_; }

  // s [B,G*G] (overwrite) from F [B,G*G,d], tex [B,13,G*G], q [B,dq] (participatory).
  void forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor& q);
  // ds [B,G*G] -> parameter gradients +=, dF [B,G*G,d] +=, dq [B,dq] += (participatory).
  void backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq);

 private:
  int64_t local_hidden() const { return pair_ ? dims_.hidden / pair_->size() : dims_.hidden; }

  ScorerKind kind_;
  ScorerDims dims_;
  Communicator* pair_ = nullptr;
  std::vector<const Param*> params_;
  Tensor w1f_, w1t_, b1_, w2_, b2_, wf_, wq_;          // values
  Tensor dw1f_, dw1t_, db1_, dw2_, db2_, dwf_, dwq_;   // gradients
  Tensor box_;                                         // 1-D clipped box mean [G, G]
  Tensor F_, tex_, q_;                                 // saved inputs
  ScratchTensor x_, tmp_, pre_, h_, fp_, qp_, dh_, dx_, part_, dqp_;  // activations and scratch
};

}  // namespace vlm

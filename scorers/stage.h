// RelevanceStage: the scorer front end of one training step, from the encoder's cell
// features to the visual tokens of the language model:
//   F (ImageEncoder, per the placement) -> the three scorers (scorers/scorer.h) ->
//   balancer (scorers/balancer.h) -> relevance r -> LOD allocation
//   (scorers/lod_allocator.h) -> tokens (scorers/lod_tokens.h)
// with the placement of the scorers in the TP group (scorers/placement.h).
// The query of image b is query[b] (the mean input embedding of its prompt) when
// has_prompt[b], else the learned default query "scorers.default_query" [dq].
// Parameters: param_specs() (all replicated); the owner allocates one ParamTable and
// binds it. Every TP rank ends forward with the same tokens; backward gives dquery
// [B, dq] (overwrite; zero rows for images without a prompt), the encoder the
// gradient of its features (encode_backward), and parameter gradients (+=), which
// finalize_grads makes complete and equal on every TP rank, once per optimizer step.
#pragma once
#include <memory>
#include <vector>

#include "nn/param_table.h"
#include "parallel/communicator.h"
#include "scorers/balancer.h"
#include "scorers/encoder_api.h"
#include "scorers/lod_allocator.h"
#include "scorers/lod_tokens.h"
#include "scorers/options.h"
#include "scorers/placement.h"
#include "scorers/scorer.h"

namespace vlm {

class RelevanceStage {
 public:
  // `opts` validated for dims.G and tp.size(); opts' scorers.hidden and scorers.k replace
  // dims.hidden and dims.k. Placement tp2 needs `pair`: this rank's
  // 2-rank group (TP ranks 2j, 2j+1), made by the owner like the TP group.
  RelevanceStage(const ScorerOptions& opts, const ScorerDims& dims, Communicator& tp, Communicator* pair = nullptr);

  // The parameters; the table is made with tp = table_tp(), rank = table_rank() (the
  // scorers are split over the pair under tp2, everything else is replicated).
  std::vector<ParamSpec> param_specs() const;
  int table_tp() const { return pair_ ? 2 : 1; }
  int table_rank() const { return pair_ ? pair_->rank() : 0; }
  void bind(const ParamTable& t);
  // Plans the buffers whose size follows the LOD allocation (the tokens, the LOD's
  // matrices) for micro-batches of at most max_images images, after bind; the others
  // are sized by the first micro-batch of each shape (scorers/scratch.h).
  void reserve(int64_t max_images);
  int64_t scorer_param_count() const;  // P of the byte formula (full tensors)

  // tex [B,13,G*G], query [B,dq]; `seed` drives lod.policy=random (per step).
  void forward(Stream& st, ImageEncoder& enc, const Tensor& tex, const Tensor& query,
               const std::vector<bool>& has_prompt, uint64_t seed);
  // The forward in three parts, so that the three scorers can run at once (on the
  // streams scorer.0..2, train/step.h): forward_prepare, then forward_scorer(k) for
  // k = 0, 1, 2 in any order or at the same time (each writes only its own map), then
  // forward_finish; forward() is the three in order, with the same results bitwise.
  // When the placement communicates (tp > 1 and not replicated: scorers_apart() is
  // false), forward_prepare does all the scoring and forward_scorer nothing.
  void forward_prepare(Stream& st, ImageEncoder& enc, const Tensor& tex, const Tensor& query,
                       const std::vector<bool>& has_prompt, uint64_t seed);
  void forward_scorer(Stream& st, int k);
  // forward_finish reads the relevance on the host (copy_to_host: it waits for st's
  // earlier work, nothing else): the allocation picks every image's token count, which
  // sizes the language model's input. It is the forward's one host synchronisation.
  void forward_finish(Stream& st);
  bool scorers_apart() const;
  // The training schedule of the next forwards' allocations (LodConfig::step_at:
  // exploration, annealed budget; the default, none, outside training).
  void set_lod_step(const LodConfig::Step& s) { lod_step_ = s; }
  const Tensor& tokens() const { return tokens_; }             // [sum T_i, d]
  const std::vector<int64_t>& offsets() const { return cu_; }  // [B+1]
  const Tensor& relevance() const { return r_; }               // [B, G*G]
  const Tensor& maps() const { return S_; }                    // [B, 3, G*G] logits
  const std::vector<ImageLod>& allocations() const { return lods_; }

  // dtokens [sum T_i, d] -> dquery [B,dq] (=), encoder gradients, parameter gradients (+=).
  void backward(Stream& st, ImageEncoder& enc, const Tensor& dquery, const Tensor& dtokens);
  // The placement's gradient traffic (scorers/placement.h), once per optimizer step.
  void finalize_grads(Stream& st);

  const Scorer& scorer(int k) const { return *scorers_[size_t(k)]; }
  const Balancer& balancer() const { return balancer_; }

 private:
  // Placement-specific parts (scorers/placement.cpp): F_ and S_ complete on every rank
  // after score_forward; score_backward takes dS_ and dF_ (the LOD part) and adds the
  // scorers' part of the query gradient into dq_.
  void score_forward(Stream& st, ImageEncoder& enc, int64_t B);
  // The parts of score_forward's replicated path: encode every image into F_; copy the
  // three maps into S_.
  void encode_all(Stream& st, ImageEncoder& enc, int64_t B);
  void gather_maps(Stream& st, int64_t B);
  void score_backward(Stream& st, ImageEncoder& enc, int64_t B);
  bool owns(int k) const { return k % tp_.size() == tp_.rank(); }

  ScorerOptions opts_;
  ScorerDims dims_;
  Communicator& tp_;
  Communicator* pair_ = nullptr;  // tp2 only
  LodAllocator alloc_;
  std::vector<std::unique_ptr<Scorer>> scorers_;
  Balancer balancer_;
  LodTokens lod_;
  Tensor q0_, dq0_;
  std::vector<bool> has_prompt_;
  uint64_t seed_ = 0;
  LodConfig::Step lod_step_;
  std::vector<ImageLod> lods_;
  ScratchTensor r_host_;             // r on the host (forward_finish)
  std::vector<double> r_f64_;  // r as the allocator reads it
  std::vector<int64_t> cu_;
  Tensor tex_;
  ScratchTensor q_, F_, S_, r_, tokens_, dF_, dS_, dq_, dr_;
  ScratchTensor m_, dm_, floc_, texloc_, qloc_, mloc_, pack_, gathered_, dfloc_, dqloc_, dqsum_;  // placement buffers
};

}  // namespace vlm

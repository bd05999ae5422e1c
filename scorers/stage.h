// RelevanceStage: the scorer front end of one training step, from the encoder's cell
// features to the visual tokens of the language model:
//   F (ImageEncoder, per the placement) -> the three scorers (scorers/scorer.h) ->
//   balancer (scorers/balancer.h) -> relevance r -> LOD allocation
//   (scorers/lod_allocator.h) -> tokens (scorers/lod_tokens.h)
// with the placement of the scorers in the TP group (scorers/placement/placement.h),
// which does the scoring part of the forward and backward and the gradient traffic.
// The query of image b is query[b] (the mean input embedding of its prompt) when
// has_prompt[b], else the learned default query "scorers.default_query" [dq]; with
// scorers.query_norm every row is then RMS-normalised, q / sqrt(mean(q^2) + 1e-6) (the
// rmsnorm op with a gain of ones, no parameter), and the scorers and the balancer read
// the normalised rows (backward takes the gradient through the norm).
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
#include "scorers/placement/placement.h"
#include "scorers/scorer.h"

namespace vlm {

class RelevanceStage {
 public:
  // `opts` validated for dims.G and tp.size(); opts' scorers.hidden and scorers.k replace
  // dims.hidden and dims.k. A placement that splits the scorers over a group
  // (ScorerPlacement::split_group: tp2's pairs of TP ranks 2j, 2j+1) needs `pair`, this
  // rank's group, made by the owner like the TP group; the others ignore it.
  RelevanceStage(const ScorerOptions& opts, const ScorerDims& dims, Communicator& tp, Communicator* pair = nullptr);

  // The parameters; the table is made with tp = table_tp(), rank = table_rank() (the
  // scorers are split over the placement's group under tp2, everything else is replicated).
  std::vector<ParamSpec> param_specs() const;
  int table_tp() const { return placement_->table_tp(); }
  int table_rank() const { return placement_->table_rank(); }
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
  // When the placement communicates (scorers_apart() is false), the three must run in
  // order on one stream (the one of the TP collectives).
  void forward_prepare(Stream& st, ImageEncoder& enc, const Tensor& tex, const Tensor& query,
                       const std::vector<bool>& has_prompt, uint64_t seed);
  void forward_scorer(Stream& st, int k);
  // forward_finish reads the relevance on the host (copy_to_host: it waits for st's
  // earlier work, nothing else): the allocation picks every image's token count, which
  // sizes the language model's input. It is the forward's one host synchronisation.
  void forward_finish(Stream& st);
  bool scorers_apart() const { return !placement_->communicates(); }
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
  // The placement's gradient traffic (ScorerPlacement::finalize_grads), once per optimizer step.
  void finalize_grads(Stream& st);
  // After backward, when the encoder trains: completes the encoder's feature gradients
  // dF [B*G*G, d] on every rank (ScorerPlacement::reduce_feature_grads).
  void reduce_feature_grads(Stream& st, const Tensor& dF) { placement_->reduce_feature_grads(st, dF); }

  const Scorer& scorer(int k) const { return *scorers_[size_t(k)]; }
  const Balancer& balancer() const { return balancer_; }

 private:
  StageTensors io();  // the tensors the placement reads and writes

  ScorerOptions opts_;
  ScorerDims dims_;
  std::unique_ptr<ScorerPlacement> placement_;
  LodAllocator alloc_;
  std::vector<std::unique_ptr<Scorer>> scorers_;
  Balancer balancer_;
  LodTokens lod_;
  Tensor q0_, dq0_;
  Tensor qgain_;  // scorers.query_norm: the norm's gain, ones [dq] in the parameters' dtype
  std::vector<bool> has_prompt_;
  uint64_t seed_ = 0;
  LodConfig::Step lod_step_;
  std::vector<ImageLod> lods_;
  ScratchTensor r_host_;             // r on the host (forward_finish)
  std::vector<double> r_f64_;  // r as the allocator reads it
  std::vector<int64_t> cu_;
  Tensor tex_;
  ScratchTensor q_, F_, S_, r_, tokens_, dF_, dS_, dq_, dr_;
  ScratchTensor qin_, qrstd_, dqin_;  // scorers.query_norm: the rows before the norm, its 1/rms, their gradient
};

}  // namespace vlm

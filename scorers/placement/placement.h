// Where the three scorers run in a TP group (scorers.placement): one strategy per file of
// this folder, each owning its consequences, so that the stage (scorers/stage.h), the
// model, the step and the planner ask the placement instead of switching on its name:
//   replicated.cpp   every TP rank encodes and scores every image; no communication
//   batch_split.cpp  TP rank r encodes and scores images r, r+tp, ...; one all-gather
//   dedicated.cpp    scorer k runs on TP rank k mod tp, which broadcasts its map
//   tp2.cpp          each scorer split over a pair of TP ranks (column/row-parallel)
// Each file states its collectives and their byte formula. The balancer and the LOD
// tokens always run on every TP rank (they are small and every rank needs the tokens).
// A placement provides:
//  - its rules (check) and what it needs: the group it splits each scorer over
//    (split_group: the stage then takes that group's communicator and the scorers'
//    parameter table is split over it);
//  - its costs for a shape: the share of the scorers' FLOPs a rank runs (share) and the
//    bytes of its collectives per micro-batch and per optimizer step;
//  - its part of the stage's step: the scoring forward (in three parts, so that
//    placements without communication let the three scorers run at once on the streams
//    scorer.0..2: train/step.h), the scoring backward, the parameter-gradient traffic
//    once per optimizer step, and the reduction of the encoder's feature gradients.
// At TP size 1 every placement is the replicated one (make_placement): there is nothing
// to place. Collectives only through the Communicator.
// A new placement is one file here and its line in the table of placement.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "scorers/encoder_api.h"
#include "scorers/scorer.h"
#include "scorers/scratch.h"

namespace vlm {

// Bytes of the local input buffers of a placement's collectives (the Communicator's
// counters: parallel/communicator.h), on the group it communicates on.
struct PlacementBytes {
  uint64_t all_gather = 0, all_reduce = 0, broadcast = 0;
  uint64_t total() const { return all_gather + all_reduce + broadcast; }
  PlacementBytes& operator+=(const PlacementBytes& o);
};

// The stage's tensors that a placement reads and writes, for a micro-batch of B images
// (RelevanceStage owns them; N = G*G cells, K = kNumScorers):
struct StageTensors {
  const ScorerDims& dims;
  const std::vector<std::unique_ptr<Scorer>>& scorers;  // K, in ScorerKind order
  Tensor tex, q;  // [B,13,N], [B,dq]: the scorers' inputs besides the features
  Tensor F, S;    // [B,N,d] features, [B,K,N] logit maps: written by the forward, complete on every rank
  Tensor dS;      // [B,K,N]: the maps' gradient, read by the backward
  Tensor dF, dq;  // [B,N,d] holds the LOD tokens' part, [B,dq] the balancer's; the
                  // backward adds the scorers' parts (dF: of the images this rank scores)
  int64_t images() const { return S.size(0); }
};

class ScorerPlacement {
 public:
  virtual ~ScorerPlacement() = default;
  virtual const char* name() const = 0;  // the value of scorers.placement
  int tp() const { return tp_; }

  // --- Rules and costs (no communicator needed) ---
  // UserError naming `as` (the option as the user gave it: "scorers.placement=tp2") when
  // it cannot run at this TP size with scorers.hidden = hidden.
  virtual void check(int64_t hidden, const std::string& as) const;
  // The size of the group each scorer is split over (tp2: 2), 0 when none: attach then
  // needs that group's communicator (the VLM gives its TP group: resolve_vlm_config).
  virtual int split_group() const { return 0; }
  // Whether the stage communicates: its tasks then run on the stream of the TP
  // collectives (train/step.h); if not, the three scorers may run at once.
  virtual bool communicates() const { return true; }
  // The share of the three scorers' FLOPs this rank runs, for micro-batches of B images
  // (scorers/flops.h).
  virtual double share(int64_t B) const = 0;
  // Bytes on its group, element size `elem`, dims' G, d, dq: per micro-batch, the forward
  // and, when the stage's backward runs, the backward; the reduction of the encoder's
  // feature gradients when the encoder trains (reduce_feature_grads); once per optimizer
  // step, when the scorers train, the parameter gradients (P elements, full tensors).
  virtual PlacementBytes forward_bytes(int64_t B, const ScorerDims& dims, size_t elem) const;
  virtual PlacementBytes backward_bytes(int64_t B, const ScorerDims& dims, size_t elem) const;
  virtual PlacementBytes feature_grad_bytes(int64_t B, const ScorerDims& dims, size_t elem) const;
  virtual PlacementBytes finalize_bytes(int64_t P, size_t elem) const;
  // What the stage's collectives count for one micro-batch's forward and backward and
  // the step's finalize_grads: the sum of the forward, backward and finalize terms.
  PlacementBytes stage_bytes(int64_t B, const ScorerDims& dims, int64_t P, size_t elem) const;

  // --- The stage's part (RelevanceStage calls these) ---
  // tp: the TP group (of size tp()); pair: the group of split_group() ranks when it is
  // not 0 (the stage's owner makes it), else ignored.
  virtual void attach(Communicator& tp, Communicator* pair);
  // What the scorers are split over (Scorer's `pair`): null unless split_group() > 0.
  virtual Communicator* scorer_group() const { return nullptr; }
  // The scorers' parameter table is made with these (nn/param_table.h).
  int table_tp() const { return scorer_group() ? scorer_group()->size() : 1; }
  int table_rank() const { return scorer_group() ? scorer_group()->rank() : 0; }

  // The scoring forward: forward_prepare, forward_scorer(k) for k = 0..K-1 (in any order
  // or at once when !communicates(); in order on one stream otherwise), forward_finish.
  // After it F and S are complete on every rank. The default: every rank encodes and
  // scores every image, each scorer writing its own map.
  virtual void forward_prepare(Stream& st, const StageTensors& io, ImageEncoder& enc);
  virtual void forward_scorer(Stream& st, const StageTensors& io, int k);
  virtual void forward_finish(Stream& st, const StageTensors& io);
  // The scoring backward: from dS, the scorers' parameter gradients (+=), their parts of
  // dF and dq, and the encoder's feature gradients (enc.encode_backward) of the images
  // this rank encodes. The default: every scorer on every image, here.
  virtual void backward(Stream& st, const StageTensors& io, ImageEncoder& enc);
  // Once per optimizer step: makes the scorers' parameter gradients complete and equal on
  // every rank (the default: nothing to do).
  virtual void finalize_grads(Stream& st, const std::vector<std::unique_ptr<Scorer>>& scorers);
  // After the backward, when the encoder trains: makes dF [B*N, d] (the encoder's
  // feature gradients, of every image) complete on every rank (the default: it is).
  virtual void reduce_feature_grads(Stream& st, const Tensor& dF);

 protected:
  explicit ScorerPlacement(int tp) : tp_(tp) {}
  // Pieces of the default path, for the placements that build on it.
  void encode_all(Stream& st, const StageTensors& io, ImageEncoder& enc);       // F of every image; maps_ sized
  void gather_maps(Stream& st, const StageTensors& io);                         // maps_ -> S
  void scatter_map_grads(Stream& st, const StageTensors& io);                   // dS -> dmaps_
  void encode_backward_all(Stream& st, const StageTensors& io, ImageEncoder& enc);
  static Tensor row(const Tensor& t, int64_t i) { return t.slice(i, i + 1); }
  static Tensor map_of(const Tensor& m, int k);  // scorer k's [B, N] in a [K, B, N] buffer

  int tp_;
  Communicator* comm_ = nullptr;  // the TP group (attach)
  ScratchTensor maps_, dmaps_;    // [K, B, N]: each scorer's map and its gradient
};

// The names of the placements, in the order of the table (replicated first).
const std::vector<std::string>& placement_names();
// The placement `name` at TP size tp (tp = 1: the replicated one); UserError for an
// unknown name (scorers.placement's choices are placement_names()).
std::unique_ptr<ScorerPlacement> make_placement(const std::string& name, int tp);
// `name`'s rules at TP size tp (check), naming `as` in the error.
void check_placement(const std::string& name, int tp, int64_t hidden, const std::string& as);

}  // namespace vlm

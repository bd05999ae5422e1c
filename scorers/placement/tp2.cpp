// tp2 (scorers/placement/placement.h): every pair of TP ranks (2j, 2j+1) encodes and
// scores every image, each scorer split over the pair (scorers/scorer.h): the hidden
// width in two, column-parallel first layers, row-parallel output; the scorers' parameter
// table is split over the pair. The pair's communicator comes from the stage's owner
// (the VLM's is its TP group: resolve_vlm_config). On the pair:
//   forward:  the three partial logit maps [B, N] are all-reduced (inside the scorers).
//   backward: the feature-gradient parts [B, N, d] of the three scorers and the
//             participatory query part [B, dq] are all-reduced.
//   The pairs compute the same, so the parameter shards need no finalize traffic.
// Bytes on the pair, s = element size, N = G*G: forward all_reduce 3*B*N*s; backward
// all_reduce B*(3*N*d + dq)*s. Share of the scorers' FLOPs per rank: 1/2.
// Rules: an even parallel.tp and an even scorers.hidden.
#include "base/error.h"
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

class Tp2 final : public ScorerPlacement {
 public:
  explicit Tp2(int tp) : ScorerPlacement(tp) {}
  const char* name() const override { return "tp2"; }
  void check(int64_t hidden, const std::string& as) const override {
    VLM_REQUIRE(tp_ % 2 == 0, as, " needs an even parallel.tp (pairs of ranks), got parallel.tp=", tp_);
    VLM_REQUIRE(hidden % 2 == 0, "scorers.hidden=", hidden, ": ", as, " splits it over two ranks, expected an even width");
  }
  int split_group() const override { return 2; }
  double share(int64_t) const override { return 0.5; }  // each scorer's hidden width split over the pair
  PlacementBytes forward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(kNumScorers) * uint64_t(B) * uint64_t(dm.cells()) * s;
    return b;
  }
  PlacementBytes backward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(B) * uint64_t(kNumScorers * dm.cells() * dm.d + dm.dq) * s;
    return b;
  }
  void attach(Communicator& tp, Communicator* pair) override {
    ScorerPlacement::attach(tp, pair);
    VLM_ASSERT(pair != nullptr && pair->size() == 2, "placement tp2 needs the 2-rank pair communicator");
    pair_ = pair;
  }
  Communicator* scorer_group() const override { return pair_; }

 private:
  Communicator* pair_ = nullptr;
};

}  // namespace

std::unique_ptr<ScorerPlacement> make_tp2_placement(int tp) { return std::make_unique<Tp2>(tp); }

}  // namespace vlm

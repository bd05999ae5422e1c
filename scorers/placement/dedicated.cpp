// dedicated (scorers/placement/placement.h): every rank encodes every image; scorer k
// runs on TP rank k mod tp (its owner).
//   forward:  the owner scores every image and broadcasts its map [B, N].
//   backward: the owner alone runs scorer k's backward; the feature and query gradients
//             [B, N, d] and [B, dq] (zero on ranks that own no scorer) are all-reduced,
//             and every rank gives the encoder every image's.
//   once per optimizer step: each scorer's parameter gradients are broadcast from its
//             owner.
// Bytes on the TP group, s = element size, N = G*G, P = the scorers' parameters:
//   forward broadcast 3*B*N*s; backward all_reduce B*(N*d + dq)*s; per step broadcast P*s.
// Share of the scorers' FLOPs per rank: ceil(3/tp) / 3 (rank 0 owns the most).
#include "core/ops.h"
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

class Dedicated final : public ScorerPlacement {
 public:
  explicit Dedicated(int tp) : ScorerPlacement(tp) {}
  const char* name() const override { return "dedicated"; }
  double share(int64_t) const override { return double((kNumScorers + tp_ - 1) / tp_) / kNumScorers; }
  PlacementBytes forward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.broadcast = uint64_t(kNumScorers) * uint64_t(B) * uint64_t(dm.cells()) * s;
    return b;
  }
  PlacementBytes backward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(B) * uint64_t(dm.cells() * dm.d + dm.dq) * s;
    return b;
  }
  PlacementBytes finalize_bytes(int64_t P, size_t s) const override {
    PlacementBytes b;
    b.broadcast = uint64_t(P) * s;
    return b;
  }

  void forward_scorer(Stream& st, const StageTensors& io, int k) override {
    if (owns(k)) ScorerPlacement::forward_scorer(st, io, k);
    comm_->broadcast(st, map_of(maps_, k), owner(k));
  }
  void backward(Stream& st, const StageTensors& io, ImageEncoder& enc) override;
  void finalize_grads(Stream& st, const std::vector<std::unique_ptr<Scorer>>& scorers) override;

 private:
  int owner(int k) const { return k % tp_; }
  bool owns(int k) const { return owner(k) == comm_->rank(); }

  ScratchTensor dfsum_, dqsum_;  // the owners' parts of dF and dq, summed over the group
};

void Dedicated::backward(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  const int64_t B = io.images();
  const DType dt = io.F.dtype();
  const DeviceKind dev = io.F.device();
  scratch(dqsum_, dev, Shape{B, io.dims.dq}, dt);
  scatter_map_grads(st, io);
  scratch(dfsum_, dev, io.F.shape(), dt);
  fill(st, dfsum_, 0.f);
  fill(st, dqsum_, 0.f);
  for (int k = 0; k < kNumScorers; ++k)
    if (owns(k)) io.scorers[size_t(k)]->backward(st, map_of(dmaps_, k), dfsum_, dqsum_);
  comm_->all_reduce(st, dfsum_);
  comm_->all_reduce(st, dqsum_);
  accumulate(st, io.dF, dfsum_, 1.f);
  accumulate(st, io.dq, dqsum_, 1.f);
  encode_backward_all(st, io, enc);
}

void Dedicated::finalize_grads(Stream& st, const std::vector<std::unique_ptr<Scorer>>& scorers) {
  for (int k = 0; k < kNumScorers; ++k)
    for (const Param* p : scorers[size_t(k)]->params()) {
      if (!p->grad.defined()) return;  // frozen (nn/param_table.h): no gradients at all
      comm_->broadcast(st, p->grad, owner(k));
    }
}

}  // namespace

std::unique_ptr<ScorerPlacement> make_dedicated_placement(int tp) { return std::make_unique<Dedicated>(tp); }

}  // namespace vlm

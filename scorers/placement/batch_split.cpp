// batch-split (scorers/placement/placement.h): TP rank r encodes and scores images r,
// r+tp, r+2tp, ... (nb = ceil(B/tp) slots per rank, padded).
//   forward:  one all-gather of each rank's [nb, N*(d+3)] block (the features and the
//             three logit maps of its images) gives every rank all of them.
//   backward: each rank runs the scorers' backward on its own images and gives the
//             encoder the feature gradients of those; the participatory query gradient
//             [B, dq] is all-reduced (rows of other ranks' images are zero).
//   feature gradients (when the encoder trains): the replicated encoder needs every
//             image's, so dF [B*N, d] is all-reduced (other ranks' rows are zero: exact).
//   once per optimizer step: the scorers' parameter gradients (per-rank partial sums)
//             are all-reduced.
// Bytes on the TP group, s = element size, N = G*G, P = the scorers' parameters:
//   forward all_gather nb*N*(d+3)*s; backward all_reduce B*dq*s; feature gradients
//   all_reduce B*N*d*s; per step all_reduce P*s.
// Share of the scorers' FLOPs per rank: nb / B.
#include "base/error.h"
#include "core/ops.h"
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

int64_t slots(int64_t B, int tp) { return (B + tp - 1) / tp; }

class BatchSplit final : public ScorerPlacement {
 public:
  explicit BatchSplit(int tp) : ScorerPlacement(tp) {}
  const char* name() const override { return "batch-split"; }
  double share(int64_t B) const override { return double(slots(B, tp_)) / double(B); }
  PlacementBytes forward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_gather = uint64_t(slots(B, tp_)) * uint64_t(dm.cells()) * uint64_t(dm.d + kNumScorers) * s;
    return b;
  }
  PlacementBytes backward_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(B) * uint64_t(dm.dq) * s;
    return b;
  }
  PlacementBytes feature_grad_bytes(int64_t B, const ScorerDims& dm, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(B) * uint64_t(dm.cells()) * uint64_t(dm.d) * s;
    return b;
  }
  PlacementBytes finalize_bytes(int64_t P, size_t s) const override {
    PlacementBytes b;
    b.all_reduce = uint64_t(P) * s;
    return b;
  }

  void forward_prepare(Stream& st, const StageTensors& io, ImageEncoder& enc) override;
  void forward_scorer(Stream&, const StageTensors&, int) override {}  // all in forward_prepare
  void forward_finish(Stream&, const StageTensors&) override {}
  void backward(Stream& st, const StageTensors& io, ImageEncoder& enc) override;
  void finalize_grads(Stream& st, const std::vector<std::unique_ptr<Scorer>>& scorers) override;
  void reduce_feature_grads(Stream& st, const Tensor& dF) override { comm_->all_reduce(st, dF); }

 private:
  // This rank's images: rank + j*tp for j < own(B).
  int64_t own(int64_t B) const { return (B - comm_->rank() + tp_ - 1) / tp_; }
  int64_t image(int64_t j) const { return comm_->rank() + j * tp_; }

  // [nb, ...] this rank's slots: features, texture, query, maps [K, nb, N] and their gradients
  ScratchTensor floc_, texloc_, qloc_, mloc_, pack_, gathered_, dmloc_, dfloc_, dqloc_, dqsum_;
};

void BatchSplit::forward_prepare(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  const int64_t B = io.images(), N = io.dims.cells(), d = io.dims.d, K = kNumScorers;
  const int64_t nb = slots(B, tp_), nr = own(B), W = N * (d + K);
  const DType dt = io.F.dtype();
  const DeviceKind dev = io.F.device();
  scratch(floc_, dev, Shape{nb, N, d}, dt);
  scratch(texloc_, dev, Shape{nb, kTextureChannels, N}, dt);
  scratch(qloc_, dev, Shape{nb, io.dims.dq}, dt);
  scratch(mloc_, dev, Shape{K, nb, N}, dt);
  scratch(pack_, dev, Shape{nb, W}, dt);
  scratch(gathered_, dev, Shape{int64_t(tp_) * nb, W}, dt);
  fill(st, pack_, 0.f);
  for (int64_t j = 0; j < nr; ++j) {
    const int64_t i = image(j);
    enc.encode(st, i, row(floc_, j).view(Shape{N, d}));
    copy(st, row(texloc_, j), row(io.tex, i));
    copy(st, row(qloc_, j), row(io.q, i));
  }
  if (nr > 0)
    for (int k = 0; k < K; ++k)
      io.scorers[size_t(k)]->forward(st, map_of(mloc_, k).slice(0, nr), floc_.slice(0, nr), texloc_.slice(0, nr),
                                     qloc_.slice(0, nr));
  for (int64_t j = 0; j < nr; ++j) {
    const Tensor pr = row(pack_, j).view(Shape{W});
    copy(st, pr.sub(0, Shape{N * d}), row(floc_, j));
    for (int k = 0; k < K; ++k) copy(st, pr.sub(N * d + k * N, Shape{N}), row(map_of(mloc_, k), j));
  }
  comm_->all_gather(st, gathered_, pack_);
  for (int q = 0; q < tp_; ++q)
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t i = q + j * tp_;
      if (i >= B) continue;
      const Tensor gr = row(gathered_, q * nb + j).view(Shape{W});
      copy(st, row(io.F, i), gr.sub(0, Shape{N, d}));
      for (int k = 0; k < K; ++k)
        copy(st, row(io.S, i).view(Shape{K, N}).slice(k, k + 1), gr.sub(N * d + k * N, Shape{1, N}));
    }
}

void BatchSplit::backward(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  const int64_t B = io.images(), N = io.dims.cells(), d = io.dims.d, K = kNumScorers;
  const int64_t nb = slots(B, tp_), nr = own(B);
  const DType dt = io.F.dtype();
  const DeviceKind dev = io.F.device();
  scratch(dqsum_, dev, Shape{B, io.dims.dq}, dt);
  scratch(dmloc_, dev, Shape{K, nb, N}, dt);
  scratch(dfloc_, dev, Shape{nb, N, d}, dt);
  scratch(dqloc_, dev, Shape{nb, io.dims.dq}, dt);
  fill(st, dqloc_, 0.f);
  for (int64_t j = 0; j < nr; ++j) {
    const int64_t i = image(j);
    copy(st, row(dfloc_, j), row(io.dF, i));  // the LOD part of this image's feature gradient
    for (int k = 0; k < K; ++k) copy(st, row(map_of(dmloc_, k), j), row(io.dS, i).view(Shape{K, N}).slice(k, k + 1));
  }
  if (nr > 0)
    for (int k = 0; k < K; ++k)
      io.scorers[size_t(k)]->backward(st, map_of(dmloc_, k).slice(0, nr), dfloc_.slice(0, nr), dqloc_.slice(0, nr));
  fill(st, dqsum_, 0.f);
  for (int64_t j = 0; j < nr; ++j) copy(st, row(dqsum_, image(j)), row(dqloc_, j));
  comm_->all_reduce(st, dqsum_);
  accumulate(st, io.dq, dqsum_, 1.f);
  for (int64_t j = 0; j < nr; ++j) enc.encode_backward(st, image(j), row(dfloc_, j).view(Shape{N, d}));
}

void BatchSplit::finalize_grads(Stream& st, const std::vector<std::unique_ptr<Scorer>>& scorers) {
  for (const auto& sc : scorers)
    for (const Param* p : sc->params()) {
      if (!p->grad.defined()) return;  // frozen (nn/param_table.h): no gradients at all
      comm_->all_reduce(st, p->grad);
    }
}

}  // namespace

std::unique_ptr<ScorerPlacement> make_batch_split_placement(int tp) { return std::make_unique<BatchSplit>(tp); }

}  // namespace vlm

// The placements of the scorers in the TP group (scorers/placement.h): the scoring part
// of RelevanceStage's forward and backward, the gradient traffic of finalize_grads and
// the byte formula. Collectives only through the Communicator; none at tp = 1.
#include "scorers/placement.h"

#include "core/ops.h"
#include "scorers/scratch.h"
#include "scorers/stage.h"

namespace vlm {

PlacementBytes placement_bytes(Placement p, int tp, int64_t B, const ScorerDims& dm, int64_t P, size_t elem) {
  PlacementBytes b;
  if (tp == 1) return b;
  const uint64_t s = elem, N = uint64_t(dm.cells()), d = uint64_t(dm.d), dq = uint64_t(dm.dq), nb = uint64_t(batch_split_slots(B, tp));
  if (p == Placement::BatchSplit) {
    b.all_gather = nb * N * (d + 3) * s;
    b.all_reduce = (uint64_t(B) * dq + uint64_t(P)) * s;
  } else if (p == Placement::Dedicated) {
    b.broadcast = (3 * uint64_t(B) * N + uint64_t(P)) * s;
    b.all_reduce = uint64_t(B) * (N * d + dq) * s;
  } else if (p == Placement::Tp2) {  // on the pair's communicator
    b.all_reduce = uint64_t(B) * (3 * N + 3 * N * d + dq) * s;
  }
  return b;
}

namespace {

Tensor row(const Tensor& t, int64_t i) { return t.slice(i, i + 1); }
// Scorer k's map in a [3, B, N] buffer.
Tensor map_of(const Tensor& m, int k) { return m.slice(k, k + 1).view(Shape{m.size(1), m.size(2)}); }

}  // namespace

void RelevanceStage::score_forward(Stream& st, ImageEncoder& enc, int64_t B) {
  const int64_t N = dims_.cells(), d = dims_.d, K = kNumScorers;
  const int tp = tp_.size(), rank = tp_.rank();
  const DType dt = F_.dtype();
  const DeviceKind dev = F_.device();
  if (opts_.scorers.placement == Placement::BatchSplit && tp > 1) {
    const int64_t nb = batch_split_slots(B, tp), nr = (B - rank + tp - 1) / tp, W = N * (d + K);
    scratch(floc_, dev, Shape{nb, N, d}, dt);
    scratch(texloc_, dev, Shape{nb, kTextureChannels, N}, dt);
    scratch(qloc_, dev, Shape{nb, dims_.dq}, dt);
    scratch(mloc_, dev, Shape{K, nb, N}, dt);
    scratch(pack_, dev, Shape{nb, W}, dt);
    scratch(gathered_, dev, Shape{int64_t(tp) * nb, W}, dt);
    fill(st, pack_, 0.f);
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t i = rank + j * tp;
      enc.encode(st, i, row(floc_, j).view(Shape{N, d}));
      copy(st, row(texloc_, j), row(tex_, i));
      copy(st, row(qloc_, j), row(q_, i));
    }
    if (nr > 0)
      for (int k = 0; k < K; ++k)
        scorers_[size_t(k)]->forward(st, map_of(mloc_, k).slice(0, nr), floc_.slice(0, nr), texloc_.slice(0, nr),
                                     qloc_.slice(0, nr));
    for (int64_t j = 0; j < nr; ++j) {
      const Tensor pr = row(pack_, j).view(Shape{W});
      copy(st, pr.sub(0, Shape{N * d}), row(floc_, j));
      for (int k = 0; k < K; ++k) copy(st, pr.sub(N * d + k * N, Shape{N}), row(map_of(mloc_, k), j));
    }
    tp_.all_gather(st, gathered_, pack_);
    for (int q = 0; q < tp; ++q)
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t i = q + j * tp;
        if (i >= B) continue;
        const Tensor gr = row(gathered_, q * nb + j).view(Shape{W});
        copy(st, row(F_, i), gr.sub(0, Shape{N, d}));
        for (int k = 0; k < K; ++k) copy(st, row(S_, i).view(Shape{K, N}).slice(k, k + 1), gr.sub(N * d + k * N, Shape{1, N}));
      }
    return;
  }
  // replicated, dedicated, tp2 (and batch-split at tp = 1): every rank encodes every image
  encode_all(st, enc, B);
  const bool dedicated = opts_.scorers.placement == Placement::Dedicated && tp > 1;
  for (int k = 0; k < K; ++k) {
    if (!dedicated || owns(k)) scorers_[size_t(k)]->forward(st, map_of(m_, k), F_, tex_, q_);
    if (dedicated) tp_.broadcast(st, map_of(m_, k), k % tp);
  }
  gather_maps(st, B);
}

bool RelevanceStage::scorers_apart() const {
  return pair_ == nullptr && (opts_.scorers.placement == Placement::Replicated || tp_.size() == 1);
}

void RelevanceStage::encode_all(Stream& st, ImageEncoder& enc, int64_t B) {
  const int64_t N = dims_.cells(), d = dims_.d;
  for (int64_t b = 0; b < B; ++b) enc.encode(st, b, row(F_, b).view(Shape{N, d}));
  scratch(m_, F_.device(), Shape{kNumScorers, B, N}, F_.dtype());
}

void RelevanceStage::forward_scorer(Stream& st, int k) {
  if (scorers_apart()) scorers_[size_t(k)]->forward(st, map_of(m_, k), F_, tex_, q_);
}

void RelevanceStage::gather_maps(Stream& st, int64_t B) {
  const int64_t N = dims_.cells(), K = kNumScorers;
  for (int64_t b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) copy(st, row(S_, b).view(Shape{K, N}).slice(k, k + 1), row(map_of(m_, k), b));
}

void RelevanceStage::score_backward(Stream& st, ImageEncoder& enc, int64_t B) {
  const int64_t N = dims_.cells(), d = dims_.d, K = kNumScorers;
  const int tp = tp_.size(), rank = tp_.rank();
  const DType dt = F_.dtype();
  const DeviceKind dev = F_.device();
  scratch(dqsum_, dev, Shape{B, dims_.dq}, dt);
  if (opts_.scorers.placement == Placement::BatchSplit && tp > 1) {
    const int64_t nb = batch_split_slots(B, tp), nr = (B - rank + tp - 1) / tp;
    scratch(dm_, dev, Shape{K, nb, N}, dt);
    scratch(dfloc_, dev, Shape{nb, N, d}, dt);
    scratch(dqloc_, dev, Shape{nb, dims_.dq}, dt);
    fill(st, dqloc_, 0.f);
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t i = rank + j * tp;
      copy(st, row(dfloc_, j), row(dF_, i));  // the LOD part of this image's feature gradient
      for (int k = 0; k < K; ++k) copy(st, row(map_of(dm_, k), j), row(dS_, i).view(Shape{K, N}).slice(k, k + 1));
    }
    if (nr > 0)
      for (int k = 0; k < K; ++k)
        scorers_[size_t(k)]->backward(st, map_of(dm_, k).slice(0, nr), dfloc_.slice(0, nr), dqloc_.slice(0, nr));
    fill(st, dqsum_, 0.f);
    for (int64_t j = 0; j < nr; ++j) copy(st, row(dqsum_, rank + j * tp), row(dqloc_, j));
    tp_.all_reduce(st, dqsum_);
    accumulate(st, dq_, dqsum_, 1.f);
    for (int64_t j = 0; j < nr; ++j) enc.encode_backward(st, rank + j * tp, row(dfloc_, j).view(Shape{N, d}));
    return;
  }
  scratch(dm_, dev, Shape{K, B, N}, dt);
  for (int64_t b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) copy(st, row(map_of(dm_, k), b), row(dS_, b).view(Shape{K, N}).slice(k, k + 1));
  if (opts_.scorers.placement == Placement::Dedicated && tp > 1) {
    scratch(dfloc_, dev, Shape{B, N, d}, dt);
    fill(st, dfloc_, 0.f);
    fill(st, dqsum_, 0.f);
    for (int k = 0; k < K; ++k)
      if (owns(k)) scorers_[size_t(k)]->backward(st, map_of(dm_, k), dfloc_, dqsum_);
    tp_.all_reduce(st, dfloc_);
    tp_.all_reduce(st, dqsum_);
    accumulate(st, dF_, dfloc_, 1.f);
    accumulate(st, dq_, dqsum_, 1.f);
  } else {
    for (int k = 0; k < K; ++k) scorers_[size_t(k)]->backward(st, map_of(dm_, k), dF_, dq_);
  }
  for (int64_t b = 0; b < B; ++b) enc.encode_backward(st, b, row(dF_, b).view(Shape{N, d}));
}

void RelevanceStage::finalize_grads(Stream& st) {
  const int tp = tp_.size();
  if (tp == 1) return;
  for (int k = 0; k < kNumScorers; ++k)
    for (const Param* p : scorers_[size_t(k)]->params()) {
      if (!p->grad.defined()) return;  // frozen (nn/param_table.h): no gradients at all
      if (opts_.scorers.placement == Placement::BatchSplit) tp_.all_reduce(st, p->grad);
      if (opts_.scorers.placement == Placement::Dedicated) tp_.broadcast(st, p->grad, k % tp);
    }
}

}  // namespace vlm

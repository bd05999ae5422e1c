// The table of placements and the default path every placement starts from
// (scorers/placement/placement.h).
#include "scorers/placement/placement.h"

#include "base/error.h"
#include "core/ops.h"

namespace vlm {

// Each defined in its own file of this folder.
std::unique_ptr<ScorerPlacement> make_replicated_placement(int tp);
std::unique_ptr<ScorerPlacement> make_batch_split_placement(int tp);
std::unique_ptr<ScorerPlacement> make_dedicated_placement(int tp);
std::unique_ptr<ScorerPlacement> make_tp2_placement(int tp);

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<ScorerPlacement> (*make)(int tp);
};
// The placements: replicated first (the default, and what every placement is at tp = 1).
const Entry kPlacements[] = {{"replicated", make_replicated_placement},
                             {"batch-split", make_batch_split_placement},
                             {"dedicated", make_dedicated_placement},
                             {"tp2", make_tp2_placement}};

const Entry& entry(const std::string& name) {
  for (const Entry& e : kPlacements)
    if (name == e.name) return e;
  std::string all;
  for (const std::string& n : placement_names()) all += cat(all.empty() ? "" : ", ", n);
  throw UserError(cat("scorers.placement=", name, ": expected one of ", all));
}

}  // namespace

const std::vector<std::string>& placement_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Entry& e : kPlacements) v.push_back(e.name);
    return v;
  }();
  return names;
}

std::unique_ptr<ScorerPlacement> make_placement(const std::string& name, int tp) {
  VLM_ASSERT(tp >= 1, "TP size ", tp);
  const Entry& e = entry(name);
  std::unique_ptr<ScorerPlacement> p = tp > 1 ? e.make(tp) : kPlacements[0].make(1);
  VLM_ASSERT(tp == 1 || name == p->name(), "placement table: '", name, "' makes '", p->name(), "'");
  return p;
}

void check_placement(const std::string& name, int tp, int64_t hidden, const std::string& as) {
  entry(name).make(tp)->check(hidden, as);
}

PlacementBytes& PlacementBytes::operator+=(const PlacementBytes& o) {
  all_gather += o.all_gather, all_reduce += o.all_reduce, broadcast += o.broadcast;
  return *this;
}

void ScorerPlacement::check(int64_t, const std::string&) const {}
PlacementBytes ScorerPlacement::forward_bytes(int64_t, const ScorerDims&, size_t) const { return {}; }
PlacementBytes ScorerPlacement::backward_bytes(int64_t, const ScorerDims&, size_t) const { return {}; }
PlacementBytes ScorerPlacement::feature_grad_bytes(int64_t, const ScorerDims&, size_t) const { return {}; }
PlacementBytes ScorerPlacement::finalize_bytes(int64_t, size_t) const { return {}; }

PlacementBytes ScorerPlacement::stage_bytes(int64_t B, const ScorerDims& dims, int64_t P, size_t elem) const {
  PlacementBytes b = forward_bytes(B, dims, elem);
  b += backward_bytes(B, dims, elem);
  b += finalize_bytes(P, elem);
  return b;
}

void ScorerPlacement::attach(Communicator& tp, Communicator*) {
  VLM_ASSERT(tp.size() == tp_, "placement ", name(), " made for tp = ", tp_, ", attached to a group of ", tp.size());
  comm_ = &tp;
}

Tensor ScorerPlacement::map_of(const Tensor& m, int k) { return m.slice(k, k + 1).view(Shape{m.size(1), m.size(2)}); }

void ScorerPlacement::encode_all(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  const int64_t B = io.images(), N = io.dims.cells(), d = io.dims.d;
  for (int64_t b = 0; b < B; ++b) enc.encode(st, b, row(io.F, b).view(Shape{N, d}));
  scratch(maps_, io.F.device(), Shape{kNumScorers, B, N}, io.F.dtype());
}

void ScorerPlacement::gather_maps(Stream& st, const StageTensors& io) {
  const int64_t B = io.images(), N = io.dims.cells(), K = kNumScorers;
  for (int64_t b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) copy(st, row(io.S, b).view(Shape{K, N}).slice(k, k + 1), row(map_of(maps_, k), b));
}

void ScorerPlacement::scatter_map_grads(Stream& st, const StageTensors& io) {
  const int64_t B = io.images(), N = io.dims.cells(), K = kNumScorers;
  scratch(dmaps_, io.F.device(), Shape{K, B, N}, io.F.dtype());
  for (int64_t b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) copy(st, row(map_of(dmaps_, k), b), row(io.dS, b).view(Shape{K, N}).slice(k, k + 1));
}

void ScorerPlacement::encode_backward_all(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  const int64_t B = io.images(), N = io.dims.cells(), d = io.dims.d;
  for (int64_t b = 0; b < B; ++b) enc.encode_backward(st, b, row(io.dF, b).view(Shape{N, d}));
}

void ScorerPlacement::forward_prepare(Stream& st, const StageTensors& io, ImageEncoder& enc) { encode_all(st, io, enc); }

void ScorerPlacement::forward_scorer(Stream& st, const StageTensors& io, int k) {
  io.scorers[size_t(k)]->forward(st, map_of(maps_, k), io.F, io.tex, io.q);
}

void ScorerPlacement::forward_finish(Stream& st, const StageTensors& io) { gather_maps(st, io); }

void ScorerPlacement::backward(Stream& st, const StageTensors& io, ImageEncoder& enc) {
  scatter_map_grads(st, io);
  for (int k = 0; k < kNumScorers; ++k) io.scorers[size_t(k)]->backward(st, map_of(dmaps_, k), io.dF, io.dq);
  encode_backward_all(st, io, enc);
}

void ScorerPlacement::finalize_grads(Stream&, const std::vector<std::unique_ptr<Scorer>>&) {}

void ScorerPlacement::reduce_feature_grads(Stream&, const Tensor&) {}

}  // namespace vlm

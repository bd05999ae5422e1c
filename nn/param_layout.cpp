// ParamLayout (nn/param_layout.h).
#include "nn/param_layout.h"

#include <algorithm>

#include "base/error.h"

namespace vlm {

ParamLayout::ParamLayout(const std::vector<ParamLayoutEntry>& params, const ParamLayoutOptions& o) : opt_(o) {
  VLM_ASSERT(o.dp.size >= 1 && o.dp.rank >= 0 && o.dp.rank < o.dp.size && o.dp.zero >= 0 && o.dp.zero <= 3,
             "parameter layout: zero ", o.dp.zero, " over DP rank ", o.dp.rank, " of ", o.dp.size);
  const size_t n = params.size();
  offset_.assign(n, 0), padded_.assign(n, 0), size_.assign(n, 0), unit_.assign(n, 0);
  // Units: runs of one layer (layer units), or the whole table; each a bf16 part, then an f32 part.
  struct Part {
    int64_t begin, end;
    bool bf16;
    int unit;
  };
  std::vector<Part> parts;
  int64_t at = 0;
  for (size_t first = 0; first < n;) {
    size_t last = first + 1;
    while (last < n && (!o.layer_units || params[last].layer == params[first].layer)) ++last;
    const int u = int(units_.size());
    const int64_t unit_begin = at;
    for (const bool form : {true, false}) {
      const int64_t part_begin = at;
      for (size_t i = first; i < last; ++i) {
        if (params[i].bf16 != form) continue;
        VLM_ASSERT(params[i].numel >= 0, "parameter layout: negative size");
        offset_[i] = at, size_[i] = params[i].numel, padded_[i] = (params[i].numel + kParamAlign - 1) / kParamAlign * kParamAlign, unit_[i] = u;
        at += padded_[i];
      }
      if (at > part_begin) parts.push_back({part_begin, at, form, u});
    }
    units_.push_back({unit_begin, at});
    unit_layer_.push_back(o.layer_units ? params[first].layer : -1);
    first = last;
  }
  numel_ = at;
  // Groups: the whole table up to zero 1; then each pooled unit, and each maximal run of other units.
  for (int u = 0; u < units(); ++u) {
    const bool fresh = u == 0 || (stage() >= 2 && (pooled(u) || pooled(u - 1)));
    unit_group_.push_back(fresh ? (u == 0 ? 0 : unit_group_.back() + 1) : unit_group_.back());
    if (pooled(u)) pooled_.push_back(u);
  }
  // Runs: parts merged with their neighbour of the same form and group; then ownership.
  const int64_t P = stage() >= 1 ? o.dp.size : 1, r = stage() >= 1 ? o.dp.rank : 0;
  for (const Part& p : parts) {
    const int g = unit_group_[size_t(p.unit)];
    if (!runs_.empty() && runs_.back().group == g && runs_.back().bf16 == p.bf16) {
      runs_.back().end = p.end;
      continue;
    }
    ShardRun run;
    run.begin = p.begin, run.end = p.end, run.bf16 = p.bf16, run.unit = p.unit, run.group = g;
    run.pooled = pooled(p.unit);
    runs_.push_back(run);
  }
  for (size_t k = 0; k < runs_.size(); ++k) {
    ShardRun& run = runs_[k];
    const int64_t s = run.size() / P;
    run.block_begin = run.begin + r * s, run.block_end = run.begin + (r + 1) * s;
    run.tail_begin = run.begin + P * s, run.tail_end = P > 1 ? run.end : run.tail_begin;
    if (P == 1) run.block_end = run.end;
    run.shard_at = owned_;
    owned_ += run.owned();
    if (group_runs_.size() <= size_t(run.group)) group_runs_.resize(size_t(run.group) + 1, {int(k), int(k)});
    group_runs_[size_t(run.group)].second = int(k) + 1;
  }
}

int ParamLayout::slot_of(int u) const {
  const auto it = std::find(pooled_.begin(), pooled_.end(), u);
  VLM_ASSERT(it != pooled_.end(), "unit ", u, " is not pooled");
  return int(it - pooled_.begin()) % 2;
}

std::vector<ParamLayout::Piece> ParamLayout::owned_pieces(size_t param) const {
  std::vector<Piece> out;
  const int64_t pb = offset_[param], pe = pb + size_[param];
  for (size_t k = 0; k < runs_.size(); ++k) {
    const ShardRun& run = runs_[k];
    if (run.end <= pb || run.begin >= pe) continue;
    const int64_t b0 = std::max(pb, run.block_begin), b1 = std::min(pe, run.block_end);
    if (b1 > b0) out.push_back({b0, b1, run.shard_at + (b0 - run.block_begin), false, int(k)});
    const int64_t t0 = std::max(pb, run.tail_begin), t1 = std::min(pe, run.tail_end);
    if (t1 > t0) out.push_back({t0, t1, run.shard_at + run.block() + (t0 - run.tail_begin), true, int(k)});
  }
  return out;
}

}  // namespace vlm

// The pieces of a model's state in a checkpoint (checkpoint/checkpoint_pieces.h).
#include "checkpoint/checkpoint_pieces.h"

#include <algorithm>

#include "base/error.h"

namespace vlm {

std::string state_group(StateKind k, ModuleId m) {
  const char* kind = k == StateKind::Value ? "model/" : k == StateKind::M ? "optim/m/" : "optim/v/";
  return kind + std::string(module_name(m));
}

namespace {

// Adds piece c of parameter j of module i (a table of `m`) for `kind`. `replicated`:
// include the parameters every TP rank holds alike; `empty`: keep pieces that are
// padding only (a reader zeroes them).
void add_piece(std::vector<StatePiece>& out, size_t i, const ModuleParams& m, size_t j, StateKind kind,
               const ParamLayout::Piece& c, bool replicated, bool empty) {
  const Param& p = m.table->params()[j];
  const bool split = m.tp_split && p.spec.split_dim >= 0;
  if (!split && !replicated) return;
  StatePiece s;
  s.module = i, s.kind = kind, s.param = &p, s.flat = c;
  s.tensor = state_group(kind, m.id) + "/" + p.spec.name;
  s.shape = p.spec.hf.dims();
  const Dims full = p.spec.full.dims();
  VLM_ASSERT(full.size() == s.shape.size() && std::equal(full.begin() + 1, full.end(), s.shape.begin() + 1),
             p.spec.name, ": padded beyond the first dimension");
  TensorRegion& g = s.region;
  g.offset.assign(full.size(), 0), g.extent = full;
  const size_t d = size_t(std::max(0, p.spec.split_dim));
  if (split) g.offset[d] = p.offset, g.extent[d] = p.local[int(d)];
  // The padding rows are the last: a slice of padding only is an empty box at the end.
  g.extent[0] = std::clamp<int64_t>(s.shape[0] - g.offset[0], 0, g.extent[0]);
  g.offset[0] = std::min(g.offset[0], s.shape[0]);
  const int64_t box = dims_numel(g.extent);
  g.begin = std::min(c.begin - p.at, box), g.end = std::min(c.end - p.at, box);
  if (g.numel() == 0 && !empty) return;
  out.push_back(std::move(s));
}

// The model's TP rank (its split tables'; 0 without one).
int tp_rank_of(const std::vector<ModuleParams>& modules) {
  for (const ModuleParams& m : modules)
    if (m.tp_split) return m.table->tp_rank();
  return 0;
}

const ParamTable& f32_table(const ModuleParams& m) {
  VLM_ASSERT(m.table->dtype() == DType::F32, "checkpoints hold f32 tables");
  return *m.table;
}

}  // namespace

std::vector<StatePiece> written_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                       int dp_rank) {
  std::vector<StatePiece> out;
  const bool tp0 = tp_rank_of(modules) == 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    const ParamTable& t = f32_table(modules[i]);
    const int r = dp_rank >= 0 ? dp_rank : t.layout().sharding().rank;
    for (StateKind k : {StateKind::Value, StateKind::M, StateKind::V}) {
      if (k != StateKind::Value && !trainable[i]) break;
      for (size_t j = 0; j < t.params().size(); ++j)
        for (const ParamLayout::Piece& c : t.layout().written_pieces(j, r))
          add_piece(out, i, modules[i], j, k, c, tp0, false);
    }
  }
  return out;
}

std::vector<StatePiece> held_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                    bool moments) {
  std::vector<StatePiece> out;
  for (size_t i = 0; i < modules.size(); ++i) {
    const ParamTable& t = f32_table(modules[i]);
    const ParamLayout& L = t.layout();
    for (size_t j = 0; j < t.params().size(); ++j) {
      const Param& p = t.params()[j];
      const std::vector<ParamLayout::Piece> owned = L.owned_pieces(j);
      if (L.resident(p.run))
        add_piece(out, i, modules[i], j, StateKind::Value, {p.at, p.at + p.local.numel(), -1, false, p.run}, true, true);
      else
        for (const ParamLayout::Piece& c : owned) add_piece(out, i, modules[i], j, StateKind::Value, c, true, true);
      if (!moments || !trainable[i]) continue;
      for (StateKind k : {StateKind::M, StateKind::V})
        for (const ParamLayout::Piece& c : owned) add_piece(out, i, modules[i], j, k, c, true, true);
    }
  }
  return out;
}

Tensor piece_storage(const std::vector<ModuleParams>& modules, const AdamW* opt, const StatePiece& p) {
  const Shape n{p.span()};
  if (p.kind != StateKind::Value) {
    VLM_ASSERT(opt, "the moments of ", p.tensor, " without an optimizer");
    const Tensor m = opt->moment(p.module, p.kind == StateKind::M ? 0 : 1);
    VLM_ASSERT(p.flat.shard_at >= 0 && p.flat.shard_at + p.span() <= m.numel(), "AdamW's moments of module ",
               p.module, " hold ", m.numel(), " elements, the layout ", p.flat.shard_at + p.span());
    return m.sub(p.flat.shard_at, n);
  }
  return modules[p.module].table->owned_view(p.flat.run, p.flat.begin, p.flat.end, p.flat.shard_at);
}

int64_t pieces_bytes(const std::vector<StatePiece>& pieces) {
  int64_t n = 0;
  for (const StatePiece& p : pieces) n += 4 * p.region.numel();
  return n;
}

}  // namespace vlm

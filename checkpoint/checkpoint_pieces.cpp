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

int64_t arena_offset(const ParamTable& t, const Param& p) {
  return (static_cast<const char*>(p.value.data()) - static_cast<const char*>(t.value_arena().storage().data())) / 4;
}

int64_t arena_elems(const ParamTable& t) {
  VLM_ASSERT(t.dtype() == DType::F32, "checkpoints hold f32 tables");
  return int64_t(t.value_arena().bytes() / 4);
}

// The pieces of `ranges` of module i's arena, for `kind`, in the module's buffer laid out
// as `held`. `replicated`: include the parameters every TP rank holds alike; `empty`:
// keep pieces that are padding only (a reader zeroes them).
void add_pieces(std::vector<StatePiece>& out, size_t i, const ModuleParams& m, StateKind kind,
                const std::vector<FlatRange>& ranges, const std::vector<FlatRange>& held, bool replicated, bool empty) {
  const ParamTable& t = *m.table;
  for (const FlatRange& r : ranges)
    for (const Param& p : t.params()) {
      const int64_t pb = arena_offset(t, p), b = std::max(r.begin, pb), e = std::min(r.end, pb + p.local.numel());
      const bool split = m.tp_split && p.spec.split_dim >= 0;
      if (b >= e || (!split && !replicated)) continue;
      StatePiece s;
      s.module = i, s.kind = kind, s.param = &p;
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
      g.begin = std::min(b - pb, box), g.end = std::min(e - pb, box);
      if (g.numel() == 0 && !empty) continue;
      s.buffer_at = held_position(held, b), s.span = e - b;
      VLM_ASSERT(s.buffer_at >= 0 && held_position(held, e - 1) == s.buffer_at + s.span - 1, p.spec.name,
                 ": a range of the arena that its buffer does not hold in one piece");
      out.push_back(std::move(s));
    }
}

}  // namespace

std::vector<StatePiece> written_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                       const StateOwner& place) {
  std::vector<StatePiece> out;
  for (size_t i = 0; i < modules.size(); ++i) {
    const StateShare sh = state_share(arena_elems(*modules[i].table), place, trainable[i]);
    add_pieces(out, i, modules[i], StateKind::Value, sh.writes, sh.values, sh.writes_tp_replicated, false);
    if (!trainable[i]) continue;
    for (StateKind k : {StateKind::M, StateKind::V})
      add_pieces(out, i, modules[i], k, sh.writes, sh.moments, sh.writes_tp_replicated, false);
  }
  return out;
}

std::vector<StatePiece> held_pieces(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable,
                                    const StateOwner& place, bool moments) {
  std::vector<StatePiece> out;
  for (size_t i = 0; i < modules.size(); ++i) {
    const StateShare sh = state_share(arena_elems(*modules[i].table), place, trainable[i]);
    add_pieces(out, i, modules[i], StateKind::Value, sh.values, sh.values, true, true);
    if (!moments || !trainable[i]) continue;
    for (StateKind k : {StateKind::M, StateKind::V})
      add_pieces(out, i, modules[i], k, sh.moments, sh.moments, true, true);
  }
  return out;
}

StateOwner state_owner(const std::vector<ModuleParams>& modules, const DpGrads* dp) {
  StateOwner o;
  for (const ModuleParams& m : modules)
    if (m.tp_split) o.tp = m.table->tp(), o.tp_rank = m.table->tp_rank();
  if (dp) o.dp = dp->dp().size(), o.dp_rank = dp->dp().rank(), o.zero = dp->zero();
  return o;
}

Tensor piece_buffer(const std::vector<ModuleParams>& modules, const AdamW* opt, const StatePiece& p) {
  if (p.kind == StateKind::Value) return flat_f32(modules[p.module].table->value_arena());
  VLM_ASSERT(opt, "the moments of ", p.tensor, " without an optimizer");
  const Tensor m = opt->moment(p.module, p.kind == StateKind::M ? 0 : 1);
  VLM_ASSERT(p.buffer_at + p.span <= m.numel(), "AdamW's moments of module ", p.module, " hold ", m.numel(),
             " elements, the ownership ", p.buffer_at + p.span);
  return m;
}

int64_t pieces_bytes(const std::vector<StatePiece>& pieces) {
  int64_t n = 0;
  for (const StatePiece& p : pieces) n += 4 * p.region.numel();
  return n;
}

}  // namespace vlm

// The pieces of a model's state in a checkpoint (checkpoint/checkpoint_pieces.h) on real
// parameter tables: a TP-split table with layer units (rows split, columns split, a
// replicated vector, a vocabulary table with padding rows; two stack layers, pooled at
// ZeRO >= 2) and a replicated frozen table (a 4-D kernel, a vector), at tp = 1, 2, 4,
// dp = 1..3 and ZeRO 0..3, each rank's tables allocated as training allocates them
// (nn/param_layout.h):
//  - what the ranks of a layout write holds each element of each logical tensor exactly
//    once (values, and moments of the trainable table), padding never; under ZeRO a
//    rank writes only elements it owns, at their place in its shard buffers;
//  - the storage a written piece is read from (piece_storage) holds the values that
//    ParamTable::write put there for exactly that region of the logical tensor;
//  - what a rank reads (held_pieces) maps each element of a parameter's local slice to
//    the element of the logical tensor that ParamTable::local_slice (an independent code
//    path) puts there: the whole slice where the run is resident, the owned pieces of a
//    pooled layer at ZeRO 3; the moments: exactly its owned elements.
#include <gtest/gtest.h>

#include <map>

#include "base/error.h"
#include "checkpoint/checkpoint_pieces.h"
#include "core/backend.h"

namespace vlm {
namespace {

ParamSpec layer_spec(std::string name, Shape full, int split_dim, int layer) {
  ParamSpec s = param_spec(std::move(name), full, split_dim, InitKind::Zeros);
  s.layer = layer;
  return s;
}

std::vector<ParamSpec> split_specs() {
  ParamSpec vocab = param_spec("embed", Shape{16, 4}, 0, InitKind::Zeros);
  vocab.hf = Shape{11, 4};  // rows 11..15 are padding
  return {vocab,
          layer_spec("l0.rows", Shape{8, 3}, 0, 0),
          layer_spec("l0.norm", Shape{5}, -1, 0),
          layer_spec("l1.cols", Shape{3, 40}, 1, 1),
          layer_spec("l1.rows", Shape{48, 5}, 0, 1),
          param_spec("final", Shape{6}, -1, InitKind::Zeros)};
}
std::vector<ParamSpec> replicated_specs() {
  return {param_spec("kernel", Shape{2, 3, 2, 2}, -1, InitKind::Zeros),
          param_spec("bias", Shape{7}, -1, InitKind::Zeros)};
}

// Elements of the logical tensor `shape` in a region, in its order.
std::vector<int64_t> elements(const Dims& shape, const TensorRegion& r) {
  std::vector<int64_t> v;
  for (int64_t e = r.begin; e < r.end; ++e) {
    int64_t rest = e, at = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      at += (r.offset[d] + rest % r.extent[d]) * stride;
      rest /= r.extent[d], stride *= shape[d];
    }
    v.push_back(at);
  }
  return v;
}

// One rank's tables, allocated for (zero, dp, dp rank), every value its index in the
// logical tensor (written through ParamTable::write).
struct Rank {
  ParamTable split, repl;
  Rank(int tp, int r, DpSharding dp)
      : split(split_specs(), tp, r, DType::F32, true), repl(replicated_specs(), 1, 0) {
    split.allocate(cpu_backend(), true, dp);
    repl.allocate(cpu_backend(), false, dp);
    for (ParamTable* t : {&split, &repl})
      for (const Param& p : t->params()) t->write(p, t->local_slice(p, iota(p.spec.hf)));
  }
  static Tensor iota(const Shape& s) {
    std::vector<float> v(size_t(s.numel()));
    for (size_t k = 0; k < v.size(); ++k) v[k] = float(k);
    return Tensor::from_vector(v, s);
  }
  std::vector<ModuleParams> modules() { return {{ModuleId::Llm, &split, true}, {ModuleId::Vision, &repl, false}}; }
};

TEST(CheckpointPieces, EveryRankWritesItsShareAndTogetherEveryElementOnce) {
  for (int tp : {1, 2, 4})
    for (int dp = 1; dp <= 3; ++dp)
      for (int zero = 0; zero <= 3; ++zero) {
        SCOPED_TRACE(cat("tp=", tp, " dp=", dp, " zero=", zero));
        std::map<std::string, std::map<int64_t, int>> written;  // tensor -> element -> times
        std::map<std::string, Dims> shapes;
        for (int t = 0; t < tp; ++t)
          for (int d = 0; d < dp; ++d) {
            Rank rank(tp, t, DpSharding{zero, dp, d});
            const std::vector<ModuleParams> mods = rank.modules();
            for (const StatePiece& p : written_pieces(mods, {true, false})) {
              EXPECT_GT(p.region.numel(), 0) << p.tensor;
              shapes[p.tensor] = p.shape;
              const std::vector<int64_t> e = elements(p.shape, p.region);
              for (int64_t x : e) ++written[p.tensor][x];
              // Under ZeRO: an owned piece, at its place in the shard buffers.
              const ParamTable& tab = *mods[p.module].table;
              if (zero > 0 && dp > 1) {
                bool owned = false;
                for (const ParamLayout::Piece& o : tab.layout().owned_pieces(size_t(p.param - tab.params().data())))
                  owned |= p.flat.begin >= o.begin && p.flat.end <= o.end &&
                           p.flat.shard_at == o.shard_at + (p.flat.begin - o.begin);
                EXPECT_TRUE(owned) << p.tensor << " [" << p.flat.begin << ", " << p.flat.end << ")";
              }
              // The storage it is read from holds those elements of the logical tensor.
              if (p.kind != StateKind::Value) continue;
              const std::vector<float> v = to_vector_f32(piece_storage(mods, nullptr, p));
              for (size_t k = 0; k < e.size(); ++k) ASSERT_EQ(v[k], float(e[k])) << p.tensor << " element " << k;
            }
          }
        EXPECT_EQ(written.size(), 6u * 3 + 2) << "values, m and v of the trainable table; values of the frozen one";
        for (const auto& [name, counts] : written) {
          EXPECT_EQ(int64_t(counts.size()), dims_numel(shapes[name])) << name;
          for (const auto& [e, n] : counts) EXPECT_EQ(n, 1) << name << " element " << e;
        }
        EXPECT_EQ(shapes["model/llm/embed"], (Dims{11, 4})) << "the logical shape, without padding";
      }
}

TEST(CheckpointPieces, ReadPiecesPutEachLogicalElementWhereTheRankKeepsIt) {
  for (int tp : {1, 2, 4})
    for (int dp : {1, 3})
      for (int zero = 0; zero <= 3; ++zero) {
        SCOPED_TRACE(cat("tp=", tp, " dp=", dp, " zero=", zero));
        Rank rank(tp, tp - 1, DpSharding{zero, dp, dp - 1});
        const ParamLayout& L = rank.split.layout();
        std::map<std::pair<std::string, StateKind>, int64_t> covered;  // (param, kind) -> elements
        for (const StatePiece& p : held_pieces(rank.modules(), {true, false}, true)) {
          covered[{p.tensor.substr(p.tensor.rfind('/') + 1), p.kind}] += p.span();
          const ParamTable& t = p.module == 0 ? rank.split : rank.repl;
          const std::vector<float> local = to_vector_f32(t.local_slice(*p.param, Rank::iota(p.param->spec.hf)));
          const int64_t first = p.flat.begin - p.param->at;
          const std::vector<int64_t> e = elements(p.shape, p.region);
          for (size_t k = 0; k < e.size(); ++k) EXPECT_EQ(local[size_t(first) + k], float(e[k])) << p.tensor;
          for (int64_t k = int64_t(e.size()); k < p.span(); ++k)
            EXPECT_EQ(local[size_t(first + k)], 0.f) << p.tensor << ": past the region, padding rows only";
          if (p.kind != StateKind::Value) {
            EXPECT_EQ(p.module, 0u) << "moments of the trainable table only";
          }
        }
        for (size_t j = 0; j < rank.split.params().size(); ++j) {
          const Param& p = rank.split.params()[j];
          int64_t owned = 0;
          for (const ParamLayout::Piece& o : L.owned_pieces(j)) owned += o.end - o.begin;
          const bool pooled3 = zero == 3 && dp > 1 && p.spec.layer >= 0;
          EXPECT_EQ(L.resident(p.run), !pooled3) << p.spec.name;
          EXPECT_EQ((covered[{p.spec.name, StateKind::Value}]), pooled3 ? owned : p.local.numel()) << p.spec.name;
          EXPECT_EQ((covered[{p.spec.name, StateKind::M}]), zero > 0 && dp > 1 ? owned : p.local.numel()) << p.spec.name;
        }
      }
}

}  // namespace
}  // namespace vlm

// The pieces of a model's state in a checkpoint (checkpoint/checkpoint_pieces.h) on real
// parameter tables: a TP-split table (rows split, columns split, a replicated vector, a
// vocabulary table with padding rows, a 4-D replicated kernel) and a replicated table, at
// tp = 1, 2, 4 and dp = 1..3, ZeRO 0 and 1:
//  - what every rank of a layout writes holds each element of each logical tensor
//    exactly once (values, and moments of the trainable table), padding never;
//  - what a rank reads (held_pieces) maps each element of its buffer to the element of
//    the logical tensor that ParamTable::local_slice (an independent code path) puts
//    there, and covers every element it holds.
#include <gtest/gtest.h>

#include <map>

#include "base/error.h"
#include "checkpoint/checkpoint_pieces.h"
#include "core/backend.h"

namespace vlm {
namespace {

std::vector<ParamSpec> split_specs() {
  ParamSpec vocab = param_spec("embed", Shape{16, 4}, 0, InitKind::Zeros);
  vocab.hf = Shape{11, 4};  // rows 11..15 are padding
  return {param_spec("rows", Shape{8, 3}, 0, InitKind::Zeros), param_spec("norm", Shape{5}, -1, InitKind::Zeros),
          param_spec("cols", Shape{3, 8}, 1, InitKind::Zeros), vocab};
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

struct Rank {
  ParamTable split, repl;
  Rank(int tp, int r) : split(split_specs(), tp, r), repl(replicated_specs(), 1, 0) {
    split.allocate(cpu_backend(), false);
    repl.allocate(cpu_backend(), false);
  }
  std::vector<ModuleParams> modules() { return {{ModuleId::Llm, &split, true}, {ModuleId::Vision, &repl, false}}; }
};

TEST(CheckpointPieces, EveryRankWritesItsShareAndTogetherEveryElementOnce) {
  for (int tp : {1, 2, 4})
    for (int dp = 1; dp <= 3; ++dp)
      for (int zero : {0, 1}) {
        SCOPED_TRACE(cat("tp=", tp, " dp=", dp, " zero=", zero));
        std::map<std::string, std::map<int64_t, int>> written;  // tensor -> element -> times
        std::map<std::string, Dims> shapes;
        for (int t = 0; t < tp; ++t) {
          Rank rank(tp, t);
          for (int d = 0; d < dp; ++d) {
            const StateOwner o{tp, t, dp, d, zero};
            for (const StatePiece& p : written_pieces(rank.modules(), {true, false}, o)) {
              EXPECT_GT(p.region.numel(), 0) << p.tensor;
              shapes[p.tensor] = p.shape;
              for (int64_t e : elements(p.shape, p.region)) ++written[p.tensor][e];
            }
          }
        }
        EXPECT_EQ(written.size(), 4u * 3 + 2) << "values, m and v of the trainable table; values of the frozen one";
        for (const auto& [name, counts] : written) {
          EXPECT_EQ(int64_t(counts.size()), dims_numel(shapes[name])) << name;
          for (const auto& [e, n] : counts) EXPECT_EQ(n, 1) << name << " element " << e;
        }
        EXPECT_EQ(shapes["model/llm/embed"], (Dims{11, 4})) << "the logical shape, without padding";
      }
}

TEST(CheckpointPieces, ReadPiecesPutEachLogicalElementWhereTheSliceHoldsIt) {
  for (int tp : {1, 2, 4})
    for (int dp : {1, 3}) {
      Rank rank(tp, tp - 1);
      const StateOwner o{tp, tp - 1, dp, dp - 1, 1};
      std::map<std::pair<size_t, std::string>, int64_t> covered;  // (module, kind) -> buffer elements
      for (const StatePiece& p : held_pieces(rank.modules(), {true, false}, o, true)) {
        covered[{p.module, state_group(p.kind, ModuleId::Llm)}] += p.span;
        if (p.kind != StateKind::Value) continue;
        const ParamTable& t = p.module == 0 ? rank.split : rank.repl;
        std::vector<float> full(size_t(p.param->spec.hf.numel()));
        for (size_t k = 0; k < full.size(); ++k) full[k] = float(k);
        const std::vector<float> local =
            to_vector_f32(t.local_slice(*p.param, Tensor::from_vector(full, p.param->spec.hf)));
        const int64_t first = p.buffer_at - (static_cast<const char*>(p.param->value.data()) -
                                             static_cast<const char*>(t.value_arena().storage().data())) / 4;
        const std::vector<int64_t> e = elements(p.shape, p.region);
        for (size_t k = 0; k < e.size(); ++k) EXPECT_EQ(local[size_t(first) + k], float(e[k])) << p.tensor;
        for (int64_t k = int64_t(e.size()); k < p.span; ++k)
          EXPECT_EQ(local[size_t(first + k)], 0.f) << p.tensor << ": past the region, padding rows only";
      }
      // Values: the whole arena's parameters; moments (ZeRO-1 at dp = 3): the block and tail.
      const int64_t n = int64_t(rank.split.value_arena().bytes() / 4);
      int64_t params = 0, owned = 0;
      for (const Param& p : rank.split.params()) params += p.local.numel();
      const DpShare s = dp_share(n, dp, dp - 1);
      for (const Param& p : rank.split.params()) {
        const int64_t b = (static_cast<const char*>(p.value.data()) -
                           static_cast<const char*>(rank.split.value_arena().storage().data())) / 4;
        for (const FlatRange& r : {s.block, s.tail})
          owned += std::max<int64_t>(0, std::min(r.end, b + p.local.numel()) - std::max(r.begin, b));
      }
      EXPECT_EQ((covered[{0, "model/llm"}]), params);
      EXPECT_EQ((covered[{0, "optim/m/llm"}]), dp == 1 ? params : owned);
    }
}

}  // namespace
}  // namespace vlm

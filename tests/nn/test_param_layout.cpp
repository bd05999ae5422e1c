// ParamLayout (nn/param_layout.h) and the storage ParamTable places by it
// (nn/param_table.h), against an element-by-element reference:
//  - layout: every parameter at a multiple of kParamAlign; units by layer, each unit's
//    bf16-form parameters before its f32-form ones; runs cover the flat space without
//    gaps, one form each, inside one group (the whole table up to zero 1, each pooled
//    layer alone at zero >= 2);
//  - ownership, for every zero level, DP size 1..4 and rank: of every run, the blocks of
//    the DP ranks are disjoint, of equal size and cover [begin, tail_begin), the tail is
//    shorter than the DP size (zero 0: every rank owns the whole run); shard_at is the
//    running sum of the owned counts, equal on every rank; owned_pieces of every
//    parameter give each of its elements to exactly one rank (blocks) or to every rank
//    (tails; zero 0: every rank's block), and nothing else;
//  - storage: zero 0 holds f32 values and gradients of everything; under ZeRO a bf16-form
//    parameter has no f32 values, its bf16 copy is written whole and its owned elements
//    land in the master shard; at zero 2 the pooled layers' gradients share two slots,
//    at zero 3 their compute copies too (layers l and l+2 alike, l and l+1 apart), while
//    the units outside the layers stay resident; a frozen pooled table keeps its owned
//    compute values.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "nn/param_layout.h"
#include "nn/param_table.h"

namespace vlm {
namespace {

// A backbone-like table: an embedding (read by lookups), L layers (a norm, two matrices
// and a bias), a head (a norm and a matrix).
std::vector<ParamSpec> specs(int L) {
  std::vector<ParamSpec> v;
  v.push_back(param_spec("embed", Shape{50, 8}, -1, InitKind::Normal, 0.02f));
  v.back().f32_reads = true;
  for (int l = 0; l < L; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    v.push_back(param_spec(p + "norm", Shape{8}, -1, InitKind::Ones));
    v.push_back(param_spec(p + "q", Shape{24, 8}, -1, InitKind::Normal, 0.02f));
    v.push_back(param_spec(p + "bias", Shape{24}, -1, InitKind::Zeros));
    v.push_back(param_spec(p + "o", Shape{8, 24}, -1, InitKind::Normal, 0.02f));
    for (size_t k = v.size() - 4; k < v.size(); ++k) v[k].layer = l;
  }
  v.push_back(param_spec("final_norm", Shape{8}, -1, InitKind::Ones));
  v.push_back(param_spec("head", Shape{50, 8}, -1, InitKind::Normal, 0.02f));
  return v;
}

std::vector<ParamLayoutEntry> entries(const std::vector<ParamSpec>& s, bool bf16) {
  std::vector<ParamLayoutEntry> e;
  for (const ParamSpec& p : s) e.push_back({p.full.numel(), p.layer, bf16 && p.full.ndim() >= 2 && !p.f32_reads});
  return e;
}

TEST(ParamLayout, UnitsRunsAndOwnershipAtEveryZeroLevel) {
  const int L = 3;
  const std::vector<ParamSpec> s = specs(L);
  for (const bool bf16 : {false, true})
    for (int zero = 0; zero <= 3; ++zero)
      for (int P = 1; P <= 4; ++P) {
        SCOPED_TRACE("bf16 " + std::to_string(bf16) + " zero " + std::to_string(zero) + " dp " + std::to_string(P));
        std::vector<ParamLayout> ranks;
        for (int r = 0; r < P; ++r) ranks.emplace_back(entries(s, bf16), ParamLayoutOptions{true, DpSharding{zero, P, r}});
        const ParamLayout& a = ranks[0];
        const int stage = P > 1 ? zero : 0;
        ASSERT_EQ(a.stage(), stage);
        // Units: the embedding, the layers, the head; bf16-form parameters first in each.
        ASSERT_EQ(a.units(), L + 2);
        for (int u = 0; u < a.units(); ++u) {
          EXPECT_EQ(a.unit_layer(u), u >= 1 && u <= L ? u - 1 : -1);
          EXPECT_EQ(a.pooled(u), stage >= 2 && u >= 1 && u <= L);
        }
        int64_t end = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          EXPECT_EQ(a.offset(i) % kParamAlign, 0) << s[i].name;
          EXPECT_GE(a.padded(i), s[i].full.numel());
          end = std::max(end, a.offset(i) + a.padded(i));
          const auto [u0, u1] = a.unit_range(a.unit_of(i));
          EXPECT_TRUE(a.offset(i) >= u0 && a.offset(i) + a.padded(i) <= u1) << s[i].name;
          for (size_t j = 0; j < s.size(); ++j)  // within a unit: bf16 form before f32 form
            if (a.unit_of(j) == a.unit_of(i) && entries(s, bf16)[i].bf16 && !entries(s, bf16)[j].bf16) {
              EXPECT_LT(a.offset(i), a.offset(j)) << s[i].name << " before " << s[j].name;
            }
        }
        EXPECT_EQ(a.numel(), end);
        // Runs: contiguous, one form, one group; merged up to zero 1 at fp32.
        int64_t at = 0, owned = 0;
        for (size_t k = 0; k < a.runs().size(); ++k) {
          const ShardRun& r = a.runs()[k];
          EXPECT_EQ(r.begin, at);
          at = r.end;
          EXPECT_EQ(r.shard_at, owned);
          owned += r.owned();
          if (k > 0) { EXPECT_TRUE(a.runs()[k - 1].group != r.group || a.runs()[k - 1].bf16 != r.bf16); }
          EXPECT_EQ(r.pooled, a.pooled(r.unit));
          if (r.pooled) { EXPECT_EQ(a.unit_group(r.unit), r.group); }
        }
        EXPECT_EQ(at, a.numel());
        EXPECT_EQ(owned, a.owned());
        if (!bf16 && stage <= 1) { EXPECT_EQ(a.runs().size(), 1u); }
        // Ownership of every element, from the blocks of all ranks.
        for (size_t k = 0; k < a.runs().size(); ++k) {
          const ShardRun& r0 = a.runs()[k];
          const int64_t sz = stage >= 1 ? r0.size() / P : r0.size();
          std::vector<int> owner(size_t(r0.size()), -1);
          for (int r = 0; r < P; ++r) {
            const ShardRun& x = ranks[size_t(r)].runs()[k];
            EXPECT_EQ(x.block(), sz);
            EXPECT_EQ(x.tail_begin, r0.tail_begin);
            EXPECT_EQ(ranks[size_t(r)].owned(), a.owned());
            if (stage == 0) {  // every rank owns the whole run
              EXPECT_TRUE(x.block_begin == r0.begin && x.block_end == r0.end && x.tail() == 0);
              continue;
            }
            for (int64_t e = x.block_begin; e < x.block_end; ++e) {
              EXPECT_EQ(owner[size_t(e - r0.begin)], -1) << "element " << e << " in two blocks";
              owner[size_t(e - r0.begin)] = r;
            }
          }
          for (int64_t e = r0.begin; e < r0.end && stage >= 1; ++e) {
            const bool in_tail = e >= r0.tail_begin;
            EXPECT_EQ(in_tail, stage >= 1 && e - r0.begin >= P * sz) << e;
            EXPECT_EQ(owner[size_t(e - r0.begin)] >= 0, !in_tail) << e;
          }
          if (stage >= 1)
            EXPECT_LT(r0.tail(), P);
          else
            EXPECT_EQ(r0.tail(), 0);
        }
        // owned_pieces: each element of each parameter once in a block, or in every rank's tail.
        for (size_t i = 0; i < s.size(); ++i) {
          std::map<int64_t, int> blocks, tails;
          for (int r = 0; r < P; ++r)
            for (const ParamLayout::Piece& c : ranks[size_t(r)].owned_pieces(i)) {
              const ShardRun& run = ranks[size_t(r)].runs()[size_t(c.run)];
              EXPECT_EQ(c.tail, c.begin >= run.tail_begin);
              EXPECT_EQ(c.shard_at, run.shard_at + (c.tail ? run.block() + c.begin - run.tail_begin : c.begin - run.block_begin));
              for (int64_t e = c.begin; e < c.end; ++e) ++(c.tail ? tails : blocks)[e];
            }
          size_t covered = 0;
          for (int64_t e = a.offset(i); e < a.offset(i) + s[i].full.numel(); ++e) {
            const int nb = blocks.count(e) ? blocks[e] : 0, nt = tails.count(e) ? tails[e] : 0;
            EXPECT_TRUE((nb == (stage >= 1 ? 1 : P) && nt == 0) || (nb == 0 && nt == P)) << s[i].name << " " << e;
            covered += nb + nt > 0;
          }
          EXPECT_EQ(covered, blocks.size() + tails.size()) << "pieces outside " << s[i].name;
        }
      }
}

// Views of a table's storage share memory.
bool same(const Tensor& a, const Tensor& b) { return a.defined() && b.defined() && a.data() == b.data(); }

TEST(ParamTable, StorageOfEveryZeroLevel) {
  Backend& b = cpu_backend();
  const int L = 3, P = 2;
  for (int zero = 0; zero <= 3; ++zero)
    for (int rank = 0; rank < P; ++rank)
      for (const bool grads : {true, false}) {
        SCOPED_TRACE("zero " + std::to_string(zero) + " rank " + std::to_string(rank) + " grads " + std::to_string(grads));
        ParamTable t(specs(L), 1, 0, DType::F32, true);
        t.add_bf16_working_copy();
        t.allocate(b, grads, DpSharding{zero, P, rank});
        const ParamLayout& lay = t.layout();
        for (const Param& p : t.params()) {
          const bool mat = p.local.ndim() >= 2, form_bf16 = mat && !p.spec.f32_reads;
          EXPECT_EQ(p.work.defined(), mat) << p.spec.name;
          if (p.work.defined()) { EXPECT_EQ(p.work.dtype(), DType::BF16); }
          // f32 values: everything at zero 0; under ZeRO the f32-form parameters (in the
          // pool at zero 3 for a layer's).
          EXPECT_EQ(p.value.defined(), zero == 0 || !form_bf16) << p.spec.name;
          EXPECT_EQ(p.grad.defined(), grads) << p.spec.name;
        }
        auto get = [&](const std::string& n) -> const Param& { return t.get(n); };
        // Two pool slots: layers l and l + 2 alike, l and l + 1 apart; the head resident.
        if (zero >= 2 && grads) {
          EXPECT_TRUE(same(get("layer0.q").grad, get("layer2.q").grad));
          EXPECT_FALSE(same(get("layer0.q").grad, get("layer1.q").grad));
        } else if (grads) {
          EXPECT_FALSE(same(get("layer0.q").grad, get("layer2.q").grad));
        }
        if (zero >= 3) {
          EXPECT_TRUE(same(get("layer0.q").work, get("layer2.q").work));
          EXPECT_TRUE(same(get("layer0.norm").value, get("layer2.norm").value));
          EXPECT_FALSE(same(get("layer0.q").work, get("layer1.q").work));
          EXPECT_GT(t.pool_bytes(), 0u);
        } else {
          EXPECT_FALSE(same(get("layer0.q").work, get("layer2.q").work));
          EXPECT_EQ(t.pool_bytes(), 0u);
        }
        // write(): the bf16 copy whole (resident), the owned elements to the shard.
        const Param& h = get("head");
        std::vector<float> v(size_t(h.local.numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * float(i) + 0.25f;
        t.write(h, Tensor::from_vector(v, h.local));
        t.refresh_working(b.default_stream());  // zero 0: the copy is derived from the values
        const std::vector<float> work = to_vector_f32(h.work);
        const Tensor hb = Tensor::zeros(b, h.local, DType::BF16);
        convert(b.default_stream(), hb, Tensor::from_vector(v, h.local));
        EXPECT_EQ(to_vector_f32(hb), work) << "the bf16 copy of a written parameter";
        const RunStorage& st = t.run(h.run);
        if (zero == 0) {
          EXPECT_EQ(to_vector_f32(h.value), v);
        } else if (grads) {
          ASSERT_TRUE(st.shard.defined());
          const std::vector<float> shard = to_vector_f32(st.shard);
          const ShardRun& r = lay.runs()[size_t(h.run)];
          size_t pieces = 0;
          for (const ParamLayout::Piece& c : lay.owned_pieces(size_t(&h - t.params().data()))) {
            for (int64_t e = c.begin; e < c.end; ++e)
              EXPECT_EQ(shard[size_t(c.shard_at - r.shard_at + e - c.begin)], v[size_t(e - h.at)]) << e;
            pieces += size_t(c.end - c.begin);
          }
          EXPECT_GT(pieces, 0u);
          EXPECT_LT(pieces, v.size()) << "a rank owns part of the head";
        } else {
          EXPECT_FALSE(st.shard.defined()) << "a frozen resident table keeps its bf16 copy only";
        }
        // A frozen pooled layer keeps its owned compute values (zero 3).
        const RunStorage& q = t.run(get("layer1.q").run);
        EXPECT_EQ(q.shard.defined(), zero >= 1 && (grads || zero >= 3));
        if (q.shard.defined()) { EXPECT_EQ(q.shard.dtype(), grads ? DType::F32 : DType::BF16); }
      }
}

}  // namespace
}  // namespace vlm

// The cached plans of the CUDA GEMM (core/plan_cache.h, core/gemm_key.h), tested on the
// host: a plan is built once per key (the heuristic's counter), every input of the
// heuristic makes a distinct key (shape, strides, leading dimensions, transposes,
// dtypes, epilogue, alignments), and the rules that choose cuBLASLt's epilogue. The same
// cache on a GPU: tests/gpu/test_cuda_backend.cpp (GemmPlansBuiltOncePerShape).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "core/gemm_key.h"
#include "core/plan_cache.h"

namespace vlm {
namespace {

alignas(256) unsigned char g_buf[4096];

GemmProblem problem() {
  GemmProblem p;
  p.M = 17, p.N = 32, p.K = 64, p.lda = 64, p.ldb = 32, p.ldc = 32;
  p.a = g_buf, p.b = g_buf + 1024, p.c = g_buf + 2048;
  p.ab = DType::BF16, p.c_dtype = DType::BF16;
  return p;
}

struct FakePlan {
  int id;
};

TEST(PlanCache, BuildsOncePerKeyAndCounts) {
  PlanCache<GemmKey, FakePlan, GemmKeyHash> cache;
  int heuristic_calls = 0;
  auto get = [&](const GemmKey& k) -> FakePlan& {
    return cache.get(k, [&] { return std::make_unique<FakePlan>(FakePlan{++heuristic_calls}); });
  };
  const GemmKey a = gemm_key(problem(), GemmEpilogue::None);
  GemmProblem q = problem();
  q.N = 48;
  const GemmKey b = gemm_key(q, GemmEpilogue::None);
  FakePlan& first = get(a);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(&get(a), &first);  // same plan, no new heuristic call
  EXPECT_EQ(heuristic_calls, 1);
  EXPECT_EQ(get(b).id, 2);
  EXPECT_EQ(get(a).id, 1);
  EXPECT_EQ(cache.builds(), 2u);
  EXPECT_EQ(cache.hits(), 6u);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(heuristic_calls, 2);
}

TEST(PlanCache, EveryHeuristicInputMakesADistinctKey) {
  const GemmProblem base = problem();
  std::vector<GemmKey> keys{gemm_key(base, GemmEpilogue::None)};
  auto vary = [&](auto&& change, GemmEpilogue e = GemmEpilogue::None) {
    GemmProblem p = base;
    change(p);
    keys.push_back(gemm_key(p, e));
  };
  vary([](GemmProblem& p) { p.M = 18; });
  vary([](GemmProblem& p) { p.N = 40; });
  vary([](GemmProblem& p) { p.K = 72; });
  vary([](GemmProblem& p) { p.batch = 3, p.stride_a = 17 * 64, p.stride_c = 17 * 32; });
  vary([](GemmProblem& p) { p.batch = 3, p.stride_a = 17 * 64, p.stride_b = 64 * 32, p.stride_c = 17 * 32; });
  vary([](GemmProblem& p) { p.ldc = 64; });
  vary([](GemmProblem& p) { p.lda = 128; });
  vary([](GemmProblem& p) { p.ldb = 40; });
  vary([](GemmProblem& p) { p.ta = true; });
  vary([](GemmProblem& p) { p.tb = true; });
  vary([](GemmProblem& p) { p.ab = DType::F32, p.c_dtype = DType::F32; });
  vary([](GemmProblem& p) { p.c_dtype = DType::F32; });
  // Alignments: each operand's pointer moved to a 16-, 4- and 2-byte boundary.
  for (int off : {16, 4, 2}) {
    vary([off](GemmProblem& p) { p.a = g_buf + off; });
    vary([off](GemmProblem& p) { p.b = g_buf + 1024 + off; });
    vary([off](GemmProblem& p) { p.c = g_buf + 2048 + off; });
  }
  // Epilogues.
  for (GemmEpilogue e : {GemmEpilogue::Bias, GemmEpilogue::Gelu, GemmEpilogue::GeluBias, GemmEpilogue::GeluAux,
                         GemmEpilogue::GeluAuxBias, GemmEpilogue::DGelu})
    vary([](GemmProblem&) {}, e);

  const GemmKeyHash hash;
  std::set<size_t> hashes;
  for (size_t i = 0; i < keys.size(); ++i) {
    hashes.insert(hash(keys[i]));
    for (size_t j = 0; j < keys.size(); ++j) EXPECT_EQ(keys[i] == keys[j], i == j) << keys[i].str() << " | " << keys[j].str();
  }
  EXPECT_EQ(hashes.size(), keys.size());  // no collision among these
  // Pointers with the same alignment give the same key.
  GemmProblem p = base;
  p.a = g_buf + 512, p.b = g_buf + 256, p.c = g_buf + 768;
  EXPECT_EQ(gemm_key(p, GemmEpilogue::Gelu), gemm_key(base, GemmEpilogue::Gelu));
}

TEST(PlanCache, PointerAlignment) {
  EXPECT_EQ(pointer_alignment(g_buf), 256);
  EXPECT_EQ(pointer_alignment(g_buf + 128), 128);
  EXPECT_EQ(pointer_alignment(g_buf + 48), 16);
  EXPECT_EQ(pointer_alignment(g_buf + 6), 2);
  EXPECT_EQ(pointer_alignment(g_buf + 7), 1);
}

TEST(PlanCache, EpilogueRules) {
  GemmProblem p = problem();
  GemmEpilogueArgs ep;
  EXPECT_EQ(fused_epilogue(p, ep), GemmEpilogue::None);
  ep.bias = g_buf + 3072, ep.bias_dtype = DType::BF16;
  EXPECT_EQ(fused_epilogue(p, ep), GemmEpilogue::Bias);
  ep.gelu = true;
  EXPECT_EQ(fused_epilogue(p, ep), GemmEpilogue::GeluBias);
  ep.aux = g_buf + 3584;
  EXPECT_EQ(fused_epilogue(p, ep), GemmEpilogue::GeluAuxBias);
  ep.bias = nullptr;
  EXPECT_EQ(fused_epilogue(p, ep), GemmEpilogue::GeluAux);
  // Our kernel instead: aux ld not a multiple of 8, a misaligned aux or bias, a bias of
  // another dtype than C's (cuBLASLt reads it in C's: an f32 bias on a bf16 C is refused).
  GemmProblem odd = p;
  odd.ldc = odd.N = 33;
  EXPECT_EQ(fused_epilogue(odd, ep), GemmEpilogue::None);
  GemmEpilogueArgs mis = ep;
  mis.aux = g_buf + 3584 + 8;
  EXPECT_EQ(fused_epilogue(p, mis), GemmEpilogue::None);
  GemmEpilogueArgs b{g_buf + 3072 + 4, DType::BF16, nullptr, false, false};
  EXPECT_EQ(fused_epilogue(p, b), GemmEpilogue::None);
  b.bias = g_buf + 3072, b.bias_dtype = DType::F32;
  EXPECT_EQ(fused_epilogue(p, b), GemmEpilogue::None);
  GemmProblem f32c = p;
  f32c.c_dtype = DType::F32;
  GemmEpilogueArgs bb{g_buf + 3072, DType::BF16, nullptr, false, false};
  EXPECT_EQ(fused_epilogue(f32c, bb), GemmEpilogue::None);
  bb.bias_dtype = DType::F32;
  EXPECT_EQ(fused_epilogue(f32c, bb), GemmEpilogue::Bias);
  // dGELU: the saved input as aux.
  GemmEpilogueArgs dg{nullptr, DType::F32, g_buf + 3584, false, true};
  EXPECT_EQ(fused_epilogue(p, dg), GemmEpilogue::DGelu);
  EXPECT_TRUE(epilogue_has_aux(GemmEpilogue::DGelu));
  EXPECT_FALSE(epilogue_has_bias(GemmEpilogue::DGelu));
}

}  // namespace
}  // namespace vlm

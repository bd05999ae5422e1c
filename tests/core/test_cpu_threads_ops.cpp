// Op-level checks of the CPU thread pool (the pool itself: test_cpu_threads.cpp, same
// binary):
//  - results do not depend on the thread count: every conformance case (plus larger
//    GEMM, attention, AdamW, norm and loss cases that split into several blocks) gives
//    bitwise the same outputs at 1 and 3 threads with every parallel path forced on;
//  - ops do not allocate once warm: a step-like sequence of ops makes no C++
//    allocation on its second run (operator new is counted in this binary).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>

#include "core/cpu/blas.h"
#include "core/cpu_threads.h"
#include "tests/core/cpu_threads_cases.h"

namespace {
std::atomic<bool> g_count_news{false};
std::atomic<int64_t> g_news{0};
}  // namespace

// Counting replacements of the global operator new/delete (malloc/free underneath).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_count_news.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace vlm::opcheck {
namespace {

// Cases big enough that GEMMs cut into several blocks (by columns, by rows, both) and
// every other loop into several chunks.
std::vector<OpCase> split_cases() {
  std::vector<OpCase> v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      v.push_back(matmul_case(130, 600, 130, ta, tb, 0, false, false, false, 1.f, 0.f));
      v.push_back(matmul_case(520, 130, 125, ta, tb, 0, false, true, true, 0.5f, 0.75f));
      v.push_back(matmul_case(300, 290, 200, ta, tb, 0, false, true, false, 1.f, 0.f));
    }
  v.push_back(matmul_case(70, 200, 19, false, true, 3, false, true, false, 1.f, 0.f));
  v.push_back(matmul_case(140, 400, 80, false, true, 2, true, false, false, 1.f, 0.f));
  for (bool causal : {true, false})
    v.push_back({cat("attention lens 70+130+5 NH4 NKV2 HS16", causal ? " causal" : ""), 0, [=](Backend& b) {
                   CaseCtx c(b, 9100 + causal);
                   const int64_t T = 205, NH = 4, NKV = 2, HS = 16;
                   Tensor q = c.rand(Shape{T, NH, HS}), k = c.rand(Shape{T, NKV, HS}), vv = c.rand(Shape{T, NKV, HS});
                   Tensor cus = c.i32({0, 70, 200, 205}), out = c.junk(Shape{T, NH, HS}), lse = c.junk(Shape{T, NH});
                   attention_forward(c.stream(), out, lse, q, k, vv, cus, 130, causal);
                   Tensor dq = c.junk(q.shape()), dk = c.junk(k.shape()), dv = c.junk(vv.shape());
                   attention_backward(c.stream(), dq, dk, dv, c.rand(Shape{T, NH, HS}), q, k, vv, out, lse, cus, 130,
                                      causal);
                   return OpOutputs{{"out", out}, {"lse", lse}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
                 }});
  v.push_back({"adamw_step n70001 bf16 copy", 0, [](Backend& b) {
                 CaseCtx c(b, 9200);
                 const Shape s{70001};
                 Tensor p = c.rand(s), m = c.rand(s, -0.1, 0.1), vv = c.rand(s, 0, 0.01), copy = c.zeros(s, DType::BF16);
                 AdamWOpts o;
                 o.lr = 1e-2f, o.weight_decay = 0.1f, o.grad_scale = 0.5f, o.step = 3;
                 adamw_step(c.stream(), p, c.rand(s), m, vv, copy, o);
                 return OpOutputs{{"param", p}, {"m", m}, {"v", vv}, {"copy", copy}};
               }});
  v.push_back({"layernorm + rmsnorm N300 C130", 0, [](Backend& b) {
                 CaseCtx c(b, 9300);
                 const Shape s{300, 130};
                 Tensor in = c.rand(s), w = c.rand(Shape{130}), bias = c.rand(Shape{130});
                 Tensor out = c.junk(s), mean = c.junk(Shape{300}), rstd = c.junk(Shape{300});
                 layernorm_forward(c.stream(), out, mean, rstd, in, w, bias, 1e-5f);
                 Tensor din = c.junk(s), dw = c.rand(Shape{130}), db = c.rand(Shape{130});
                 layernorm_backward(c.stream(), din, dw, db, c.rand(s), in, w, mean, rstd);
                 Tensor rout = c.junk(s), rr = c.junk(Shape{300}), rdin = c.junk(s), rdw = c.rand(Shape{130});
                 rmsnorm_forward(c.stream(), rout, rr, in, w, 1e-6f);
                 rmsnorm_backward(c.stream(), rdin, rdw, c.rand(s), in, w, rr);
                 return OpOutputs{{"out", out}, {"din", din}, {"dw", dw}, {"db", db}, {"rout", rout}, {"rdin", rdin},
                                  {"rdw", rdw}};
               }});
  v.push_back({"cross_entropy N9 V3000 + sum_squares n100001", 0, [](Backend& b) {
                 CaseCtx c(b, 9400);
                 Tensor logits = c.rand(Shape{9, 3000}, -4, 4), tg = c.i32({0, 5, -1, 2999, 7, 100, 1000, 3, 4});
                 Tensor losses = c.junk(Shape{9}), dlogits = c.junk(Shape{9, 3000});
                 cross_entropy_forward(c.stream(), losses, logits, tg, -1);
                 cross_entropy_backward(c.stream(), dlogits, logits, tg, c.rand(Shape{9}), -1);
                 Tensor ss = c.zeros(Shape{1});
                 sum_squares(c.stream(), ss, c.rand(Shape{100001}));
                 return OpOutputs{{"losses", losses}, {"dlogits", dlogits}, {"sum_squares", ss}};
               }});
  return v;
}

TEST(CpuThreads, ResultsDoNotDependOnThreadCount) {
  // The GEMM shapes of split_cases() are cut into blocks by columns, by rows and both.
  EXPECT_EQ(cpu::gemm_blocks(130, 600, 130), 2);
  EXPECT_EQ(cpu::gemm_blocks(520, 130, 125), 2);
  EXPECT_EQ(cpu::gemm_blocks(300, 290, 200), 4);
  ForceParallel force;
  std::vector<OpCase> cases = all_op_cases();
  for (OpCase& c : split_cases()) cases.push_back(std::move(c));
  for (const OpCase& c : cases) {
    OpOutputs one, three;
    {
      ThreadBudgetScope s(1);
      one = c.run(cpu_backend());
    }
    {
      ThreadBudgetScope s(3);
      three = c.run(cpu_backend());
    }
    ASSERT_EQ(one.size(), three.size()) << c.name;
    for (size_t k = 0; k < one.size(); ++k) {
      const std::vector<double> a = to_vector_f64(one[k].t), b = to_vector_f64(three[k].t);
      ASSERT_EQ(a.size(), b.size()) << c.name;
      size_t diff = 0;
      for (size_t i = 0; i < a.size(); ++i) diff += !(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])));
      EXPECT_EQ(diff, 0u) << c.name << ": output " << one[k].name << " differs in " << diff << " of " << a.size()
                          << " elements between 1 and 3 threads";
    }
  }
}

// One step's worth of op kinds on tensors made beforehand: the second run makes no C++
// allocation (scratch and pools are kept; kernels allocate nothing per call).
TEST(CpuThreads, WarmOpsDoNotAllocate) {
  ThreadBudgetScope scope(2);
  ForceParallel force;  // every parallel path runs, even at these sizes
  CaseCtx c(cpu_backend(), 9500);
  Stream& s = c.stream();
  const int64_t T = 96, C = 64, NH = 4, HS = 16, V = 300;
  Tensor x = c.rand(Shape{T, C}), w = c.rand(Shape{3 * C, C}), bias = c.rand(Shape{3 * C});
  Tensor qkv = c.junk(Shape{T, 3 * C}), pre = c.junk(Shape{T, 3 * C});
  Tensor lnw = c.rand(Shape{C}), lnb = c.rand(Shape{C}), ln = c.junk(Shape{T, C}), mean = c.junk(Shape{T}),
         rstd = c.junk(Shape{T}), dln = c.junk(Shape{T, C}), dlnw = c.zeros(Shape{C}), dlnb = c.zeros(Shape{C});
  Tensor q = c.rand(Shape{T, NH, HS}), k = c.rand(Shape{T, NH, HS}), vv = c.rand(Shape{T, NH, HS});
  Tensor cus = c.i32({0, 40, 96}), att = c.junk(Shape{T, NH, HS}), lse = c.junk(Shape{T, NH});
  Tensor dq = c.junk(q.shape()), dk = c.junk(k.shape()), dv = c.junk(vv.shape()), g = c.rand(Shape{T, NH, HS});
  Tensor logits = c.rand(Shape{T, V}), tg = c.ints(Shape{T}, 0, int(V) - 1), losses = c.junk(Shape{T}),
         dlogits = c.junk(Shape{T, V}), dl = c.rand(Shape{T});
  Tensor pos = c.ints(Shape{T}, 0, 500), rope = c.junk(Shape{T, NH, HS});
  Tensor p = c.rand(Shape{5000}), pg = c.rand(Shape{5000}), m = c.zeros(Shape{5000}), v2 = c.zeros(Shape{5000}),
         copy = c.zeros(Shape{5000}, DType::BF16), ss = c.zeros(Shape{1});
  Tensor img = c.rand(Shape{2, 3, 12, 12}), cw = c.rand(Shape{8, 3, 3, 3}), conv = c.junk(Shape{2, 8, 10, 10});
  auto step = [&] {
    GemmOpts o;
    o.trans_b = true, o.bias = &bias, o.gelu = true, o.pre_gelu = &pre;
    matmul(s, qkv, x, w, o);
    layernorm_forward(s, ln, mean, rstd, x, lnw, lnb, 1e-5f);
    layernorm_backward(s, dln, dlnw, dlnb, ln, x, lnw, mean, rstd);
    attention_forward(s, att, lse, q, k, vv, cus, 56, true);
    attention_backward(s, dq, dk, dv, g, q, k, vv, att, lse, cus, 56, true);
    cross_entropy_forward(s, losses, logits, tg, -1);
    cross_entropy_backward(s, dlogits, logits, tg, dl, -1);
    rope_forward(s, rope, q, pos, 10000.f);
    AdamWOpts ao;
    adamw_step(s, p, pg, m, v2, copy, ao);
    sum_squares(s, ss, p);
    conv2d_forward(s, conv, img, cw, Tensor{}, 1, 0);
    cpu_backend().memset_zero(dlogits.data(), dlogits.nbytes());
  };
  step();  // warm: pools, scratch and BLAS buffers are created here
  g_news = 0;
  g_count_news = true;
  step();
  g_count_news = false;
  EXPECT_EQ(g_news.load(), 0) << "C++ allocations inside warm CPU ops";
}

}  // namespace
}  // namespace vlm::opcheck

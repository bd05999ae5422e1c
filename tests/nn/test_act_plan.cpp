// ActPlan (nn/act_plan.h): one declaration reserves a buffer and binds its field; the
// arena's bytes equal the sum of the 256-byte aligned buffers (computed here from the
// shapes, not from the plan); aliases share memory; cut() re-binds every field to the
// first T (or Ts, or per_token*T) rows of its buffer, without moving it; the arena
// starts zeroed; f64 arenas for gradient checks.
#include <gtest/gtest.h>

#include "core/backend.h"
#include "nn/act_plan.h"

namespace vlm {
namespace {

size_t aligned(size_t n) { return (n + 255) / 256 * 256; }

struct Acts {
  Tensor a, b, stats, c, alias_of_a;
};

TEST(ActPlan, DeclaresBindsAliasesAndCuts) {
  using R = ActPlan::Rows;
  Acts x;
  ActPlan p;
  p.add(&x.a, R::T, {3});         // [T,3]
  p.add(&x.b, R::Ts, {2, 5});     // [Ts,2,5]
  p.add(&x.stats, R::T, {}, 2);   // [2T]
  p.add(&x.c, R::Ts);             // [Ts]
  p.alias(&x.alias_of_a, &x.a);
  EXPECT_EQ(p.buffers(), 4u);
  const int64_t T = 12, Ts = 4;
  p.allocate(cpu_backend(), T, Ts);
  const size_t want = aligned(T * 3 * 4) + aligned(Ts * 10 * 4) + aligned(2 * T * 4) + Ts * 4;
  EXPECT_EQ(p.bytes(), want);
  EXPECT_EQ(x.a.shape(), (Shape{T, 3}));
  EXPECT_EQ(x.b.shape(), (Shape{Ts, 2, 5}));
  EXPECT_EQ(x.stats.shape(), (Shape{2 * T}));
  EXPECT_EQ(x.c.shape(), (Shape{Ts}));
  EXPECT_EQ(x.alias_of_a.data(), x.a.data());
  EXPECT_EQ(x.alias_of_a.shape(), x.a.shape());
  for (float v : to_vector_f32(x.b)) EXPECT_EQ(v, 0.f);
  // Distinct buffers do not overlap and are 256-byte aligned.
  const char* base = static_cast<const char*>(x.a.data());
  EXPECT_EQ(static_cast<const char*>(x.b.data()) - base, int64_t(aligned(T * 3 * 4)));
  EXPECT_EQ(static_cast<const char*>(x.stats.data()) - base, int64_t(aligned(T * 3 * 4) + aligned(Ts * 10 * 4)));

  void* const b_data = x.b.data();
  p.cut(5, 2);
  EXPECT_EQ(x.a.shape(), (Shape{5, 3}));
  EXPECT_EQ(x.b.shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(x.stats.shape(), (Shape{10}));
  EXPECT_EQ(x.c.shape(), (Shape{2}));
  EXPECT_EQ(x.alias_of_a.shape(), (Shape{5, 3}));
  EXPECT_EQ(x.b.data(), b_data);
  p.cut(T, Ts);
  EXPECT_EQ(x.a.shape(), (Shape{T, 3}));
}

TEST(ActPlan, F64Arena) {
  Tensor t;
  ActPlan p;
  p.add(&t, ActPlan::Rows::T, {7});
  p.allocate(cpu_backend(), 3, 3, DType::F64);
  EXPECT_EQ(t.dtype(), DType::F64);
  EXPECT_EQ(p.bytes(), size_t(3 * 7 * 8));
}

// A bf16 arena (train.precision=bf16): activations take 2 bytes, statistics stay f32
// (4 bytes; f64 in an f64 arena); a fixed buffer keeps its rows when the plan is cut.
TEST(ActPlan, Bf16ActivationsF32StatisticsAndFixedRows) {
  using R = ActPlan::Rows;
  for (DType act : {DType::BF16, DType::F32, DType::F64}) {
    Tensor a, stat, chunk;
    ActPlan p;
    p.add(&a, R::T, {5});           // [T,5] activation
    p.add_f32(&stat, R::Ts, {}, 2);  // [2Ts] statistic
    p.add(&chunk, R::Fixed, {9}, 4);  // [4,9] whatever T
    const int64_t T = 10, Ts = 10;
    p.allocate(cpu_backend(), T, Ts, act);
    const DType st = act == DType::BF16 ? DType::F32 : act;
    EXPECT_EQ(a.dtype(), act);
    EXPECT_EQ(chunk.dtype(), act);
    EXPECT_EQ(stat.dtype(), st);
    EXPECT_EQ(p.act_dtype(), act);
    const size_t ea = dtype_size(act), es = dtype_size(st);
    EXPECT_EQ(p.bytes(), aligned(T * 5 * ea) + aligned(2 * Ts * es) + 4 * 9 * ea);
    EXPECT_EQ(chunk.shape(), (Shape{4, 9}));
    p.cut(3, 3);
    EXPECT_EQ(a.shape(), (Shape{3, 5}));
    EXPECT_EQ(stat.shape(), (Shape{6}));
    EXPECT_EQ(chunk.shape(), (Shape{4, 9}));
  }
}

}  // namespace
}  // namespace vlm

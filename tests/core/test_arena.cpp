// Arena tests: 256-byte aligned offsets and pointers, views by name with the planned
// shape/dtype, no overlap, zero-fill at allocation and by zero(), and views keeping
// the storage alive after the Arena object is gone; an arena larger than the memory
// available is an OutOfMemory naming it (core/out_of_memory.h), before anything is asked.
#include <gtest/gtest.h>

#include <cstdint>

#include "base/memory_check.h"
#include "core/arena.h"
#include "core/out_of_memory.h"

namespace vlm {
namespace {

TEST(Arena, LargerThanTheMemoryIsOutOfMemoryNamingTheArena) {
  Arena a("grads");
  a.add("model.embed_tokens.weight", Shape{int64_t(1) << 40, 1024});  // 4 PiB of f32
  a.add("lm_head.weight", Shape{2});
  const size_t bytes = a.bytes();
  ASSERT_GT(uint64_t(bytes), allocatable_bytes());
  try {
    a.allocate(cpu_backend());
    FAIL() << "an arena of " << bytes << " bytes was allocated";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.device(), DeviceKind::CPU);
    EXPECT_EQ(e.bytes(), bytes);
    EXPECT_EQ(e.what_failed(), "arena 'grads' (2 tensors, first 'model.embed_tokens.weight')");
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("arena 'grads' (2 tensors, first 'model.embed_tokens.weight'): out of memory on cpu: needs " +
                             format_bytes_exact(bytes) + ", more than the ",
                         0),
              0u)
        << what;
    EXPECT_NE(what.find(" of memory available"), std::string::npos) << what;
  }
  EXPECT_FALSE(a.allocated());
  const OutOfMemory plain(DeviceKind::CUDA, 300, "", "cudaMalloc on cuda:0: 1.0 KiB free of 80.00 GiB");
  EXPECT_STREQ(plain.what(), "an allocation: out of memory on cuda: needs 300 B, cudaMalloc on cuda:0: 1.0 KiB free of "
                             "80.00 GiB");
}

TEST(Arena, OffsetsAlignedViewsByName) {
  Arena a("params");
  a.add("w1", Shape{3, 5});
  a.add("b1", Shape{7}, DType::F64);
  a.add("ids", Shape{1}, DType::I32);
  a.add("big", Shape{17, 33}, DType::BF16);
  a.allocate(cpu_backend());
  ASSERT_TRUE(a.allocated());
  size_t end = 0;
  for (const Arena::Entry& e : a.entries()) {
    EXPECT_EQ(e.offset % 256, 0u) << e.name;
    EXPECT_GE(e.offset, end) << e.name << " overlaps the previous tensor";
    end = e.offset + size_t(e.shape.numel()) * dtype_size(e.dtype);
    Tensor t = a.get(e.name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 256, 0u) << e.name;
    EXPECT_EQ(t.shape(), e.shape);
    EXPECT_EQ(t.dtype(), e.dtype);
    EXPECT_TRUE(t.is_cpu());
  }
  EXPECT_LE(end, a.bytes());
  EXPECT_TRUE(a.has("b1"));
  EXPECT_FALSE(a.has("nope"));
  EXPECT_EQ(a.get("big").shape(), (Shape{17, 33}));
  EXPECT_EQ(a.get("b1").dtype(), DType::F64);
}

TEST(Arena, ZeroFilledAndZero) {
  Arena a;
  a.add("x", Shape{100});
  a.add("y", Shape{3, 3}, DType::F64);
  a.allocate(cpu_backend());
  for (float v : to_vector_f32(a.get("x"))) EXPECT_EQ(v, 0.f);
  float* x = a.get("x").ptr<float>();
  double* y = a.get("y").ptr<double>();
  for (int i = 0; i < 100; ++i) x[i] = float(i + 1);
  for (int i = 0; i < 9; ++i) y[i] = -1.0;
  a.zero();
  for (float v : to_vector_f32(a.get("x"))) EXPECT_EQ(v, 0.f);
  for (double v : to_vector_f64(a.get("y"))) EXPECT_EQ(v, 0.0);
}

TEST(Arena, WritesThroughOneViewAreSeenByAnother) {
  Arena a;
  a.add("x", Shape{4, 2});
  a.allocate(cpu_backend());
  a.get("x").ptr<float>()[5] = 2.5f;
  EXPECT_EQ(to_vector_f32(a.get("x").view(Shape{8}))[5], 2.5f);
}

TEST(Arena, ViewKeepsStorageAlive) {
  Tensor kept;
  {
    Arena a;
    a.add("x", Shape{1000});
    a.allocate(cpu_backend());
    kept = a.get("x");
    kept.ptr<float>()[999] = 7.f;
  }
  // The Arena is gone; the view still owns the allocation.
  EXPECT_EQ(kept.ptr<float>()[999], 7.f);
  kept.ptr<float>()[0] = 1.f;
  EXPECT_EQ(to_vector_f32(kept)[0], 1.f);
}

// rows()/cols() of the [.., C] view every row-wise op uses; an empty last dim must not
// divide by zero.
TEST(Shape, RowsAndColsIncludingEmptyDims) {
  EXPECT_EQ(Shape({2, 3, 4}).rows(), 6);
  EXPECT_EQ(Shape({2, 3, 4}).cols(), 4);
  EXPECT_EQ(Shape({5}).rows(), 1);
  EXPECT_EQ(Shape({}).rows(), 1);
  EXPECT_EQ(Shape({}).cols(), 1);
  EXPECT_EQ(Shape({7, 0}).rows(), 7);
  EXPECT_EQ(Shape({7, 0}).cols(), 0);
  EXPECT_EQ(Shape({0, 3}).rows(), 0);
}

TEST(ArenaDeathTest, DuplicateNameAndUnknownView) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Arena a("acts");
  a.add("x", Shape{2});
  EXPECT_DEATH(a.add("x", Shape{3}), "duplicate tensor 'x'");
  a.allocate(cpu_backend());
  EXPECT_DEATH(a.get("y"), "has no tensor 'y'");
}

}  // namespace
}  // namespace vlm

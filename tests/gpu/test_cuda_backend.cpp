// Tests of the CUDA backend basics on a real GPU: allocation and copies in every
// direction, zero-filled tensors, ordering across streams through events, event query,
// synchronize and elapsed time around the copy op, f32 <-> bf16 conversion against the
// host rounding of core/dtype.h, and one cuBLASLt matmul with
// the bias+GELU epilogue against a host reference; the GEMM plan cache (one heuristic
// call per key). Each test skips with the driver's
// reason when no GPU is visible (so CI without a GPU passes and says why).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/cuda/cuda_backend.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm {
namespace {

#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    if (!cuda_available()) GTEST_SKIP() << cuda_unavailable_reason();   \
  } while (0)

std::vector<float> iota_values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * float(int(i % 97) - 48) + 0.25f;
  return v;
}

TEST(CudaBackend, ReasonWhenUnavailable) {
  if (cuda_available()) {
    EXPECT_TRUE(cuda_unavailable_reason().empty());
    EXPECT_EQ(cuda_backend().description().rfind("cuda:", 0), 0u) << cuda_backend().description();
  } else {
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  }
}

TEST(CudaBackend, AllocCopyRoundTrip) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  const size_t n = 100003;  // odd size: no tail assumptions
  std::vector<float> host = iota_values(n, 0.5f);
  Tensor h = Tensor::from_vector(host, Shape{int64_t(n)});
  Tensor d1 = to_backend(gpu, h);                          // host -> device
  Tensor d2 = Tensor::empty(gpu, h.shape());
  copy_tensor(d2, d1);                                     // device -> device
  EXPECT_EQ(to_vector_f32(d2), host);                      // device -> host
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d2.data()) % 256, 0u);
}

TEST(CudaBackend, ZerosAndFill) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  Tensor z = Tensor::zeros(gpu, Shape{7, 13});
  for (float x : to_vector_f32(z)) EXPECT_EQ(x, 0.f);
  fill(gpu.default_stream(), z, 2.5f);
  gpu.default_stream().synchronize();
  for (float x : to_vector_f32(z)) EXPECT_EQ(x, 2.5f);
}

TEST(CudaBackend, EventsOrderStreams) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  auto a = gpu.create_stream("a");
  auto b = gpu.create_stream("b");
  auto done = gpu.create_event();
  const int64_t n = 1 << 22;  // big enough that the producer is still running
  Tensor x = Tensor::empty(gpu, Shape{n});
  Tensor one = Tensor::empty(gpu, Shape{n});
  Tensor y = Tensor::empty(gpu, Shape{n}, DType::BF16);
  fill(*a, x, 1.f);
  fill(*a, one, 1.f);
  for (int i = 0; i < 100; ++i) accumulate(*a, x, one, 1.f);  // x = 101
  a->record(*done);
  b->wait(*done);
  convert(*b, y, x);  // must see the finished x
  b->synchronize();
  std::vector<float> got = to_vector_f32(y);
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(got[size_t(i)], 101.f) << "element " << i;
  EXPECT_EQ(got.back(), 101.f);
}

// After synchronize() both events are complete (query), timing events measure a
// positive time, and copy (the op) moved the bytes in stream order.
TEST(CudaBackend, EventQuerySynchronizeElapsedAndCopy) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  Stream& s = gpu.default_stream();
  auto start = gpu.create_event(/*timing=*/true), stop = gpu.create_event(/*timing=*/true);
  const int64_t n = 1 << 22;
  Tensor x = Tensor::empty(gpu, Shape{n}), one = Tensor::empty(gpu, Shape{n}), y = Tensor::empty(gpu, Shape{n});
  fill(s, x, 1.f);
  fill(s, one, 1.f);
  s.record(*start);
  for (int i = 0; i < 200; ++i) accumulate(s, x, one, 1.f);  // x = 201
  copy(s, y, x);
  s.record(*stop);
  stop->synchronize();
  EXPECT_TRUE(stop->query());
  EXPECT_TRUE(start->query());
  EXPECT_GT(stop->elapsed_ms(*start), 0.f);
  std::vector<float> got = to_vector_f32(y);
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(got[size_t(i)], 201.f) << "element " << i;
}

TEST(CudaBackend, Bf16ConvertMatchesHostRounding) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  std::vector<float> v = {0.f, -0.f, 1.f, -1.5f, 3.14159265f, 1.00390625f /* tie: even */, 1.01171875f /* tie: up */,
                          1e-40f /* denormal */, 65504.f, 3.4e38f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> more = iota_values(1001, 0.0137f);
  v.insert(v.end(), more.begin(), more.end());
  const int64_t n = int64_t(v.size());
  Tensor d = to_backend(gpu, Tensor::from_vector(v, Shape{n}));
  Tensor b = Tensor::empty(gpu, Shape{n}, DType::BF16);
  Tensor back = Tensor::empty(gpu, Shape{n});
  Stream& s = gpu.default_stream();
  convert(s, b, d);
  convert(s, back, b);
  s.synchronize();
  Tensor hb = to_host(b);
  std::vector<float> r = to_vector_f32(back);
  for (int64_t i = 0; i < n; ++i) {
    const float want = bf16_to_f32(f32_to_bf16(v[size_t(i)]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(r[size_t(i)])) << "element " << i;
    } else {
      EXPECT_EQ(hb.ptr<bf16>()[i].bits, f32_to_bf16(v[size_t(i)]).bits) << "element " << i << " = " << v[size_t(i)];
      EXPECT_EQ(r[size_t(i)], want) << "element " << i;
    }
  }
}

// C[M,N] = gelu(A[M,K] @ B[K,N] + bias), bf16 A/B, f32 C, with pre_gelu saved.
TEST(CudaBackend, MatmulBf16BiasGeluEpilogue) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  const int64_t M = 37, K = 64, N = 48;
  std::vector<float> a = iota_values(size_t(M * K), 0.01f), b = iota_values(size_t(K * N), 0.013f);
  std::vector<float> bias = iota_values(size_t(N), 0.05f);
  for (float& x : a) x = bf16_to_f32(f32_to_bf16(x));  // exact in bf16: only the sum rounds
  for (float& x : b) x = bf16_to_f32(f32_to_bf16(x));
  Stream& s = gpu.default_stream();
  Tensor da = to_backend(gpu, Tensor::from_vector(a, Shape{M, K}));
  Tensor db = to_backend(gpu, Tensor::from_vector(b, Shape{K, N}));
  Tensor a16 = Tensor::empty(gpu, Shape{M, K}, DType::BF16), b16 = Tensor::empty(gpu, Shape{K, N}, DType::BF16);
  convert(s, a16, da);
  convert(s, b16, db);
  Tensor dbias = to_backend(gpu, Tensor::from_vector(bias, Shape{N}));
  Tensor c = Tensor::empty(gpu, Shape{M, N}), pre = Tensor::empty(gpu, Shape{M, N});
  GemmOpts o;
  o.bias = &dbias;
  o.gelu = true;
  o.pre_gelu = &pre;
  matmul(s, c, a16, b16, o);
  s.synchronize();
  std::vector<float> got = to_vector_f32(c), got_pre = to_vector_f32(pre);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = bias[size_t(j)];
      for (int64_t k = 0; k < K; ++k) acc += double(a[size_t(i * K + k)]) * double(b[size_t(k * N + j)]);
      const double g = 0.5 * acc * (1.0 + std::tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
      EXPECT_NEAR(got_pre[size_t(i * N + j)], acc, 1e-4 * (1.0 + std::fabs(acc))) << i << "," << j;
      EXPECT_NEAR(got[size_t(i * N + j)], g, 1e-3 * (1.0 + std::fabs(g))) << i << "," << j;
    }
}

// The GEMM plan cache on the device (docs/gpu.md, "GEMMs"): the first call of a key runs
// cuBLASLt's heuristic (a build), repeated calls reuse it (hits), another shape or
// another epilogue is another key, and a cached plan gives the same bits.
TEST(CudaBackend, GemmPlansBuiltOncePerKey) {
  REQUIRE_GPU();
  Backend& gpu = cuda_backend();
  std::unique_ptr<Stream> s = gpu.create_stream("plans");  // a fresh stream: an empty cache
  cuda::CudaStream& cs = cuda::cuda_stream(*s);
  const int64_t M = 64, N = 96, K = 128;
  Tensor a = to_backend(gpu, Tensor::from_vector(iota_values(size_t(M * K), 0.01f), Shape{M, K}));
  Tensor b = to_backend(gpu, Tensor::from_vector(iota_values(size_t(K * N), 0.02f), Shape{K, N}));
  Tensor c = Tensor::empty(gpu, Shape{M, N}), bias = Tensor::zeros(gpu, Shape{N});
  matmul(*s, c, a, b, GemmOpts{});
  s->synchronize();
  const std::vector<float> first = to_vector_f32(c);
  const cuda::PlanCounts one = cuda::gemm_plan_counts(cs);
  EXPECT_EQ(one.builds, 1u);
  for (int i = 0; i < 5; ++i) matmul(*s, c, a, b, GemmOpts{});
  s->synchronize();
  const cuda::PlanCounts same = cuda::gemm_plan_counts(cs);
  EXPECT_EQ(same.builds, 1u) << "the heuristic ran again for a known key";
  EXPECT_EQ(same.hits, 5u);
  EXPECT_EQ(to_vector_f32(c), first);
  GemmOpts withbias;
  withbias.bias = &bias;
  matmul(*s, c, a, b, withbias);  // another epilogue: another key
  Tensor c2 = Tensor::empty(gpu, Shape{M - 1, N});
  matmul(*s, c2, a.slice(0, M - 1), b, GemmOpts{});  // another shape
  s->synchronize();
  EXPECT_EQ(cuda::gemm_plan_counts(cs).builds, 3u);
  EXPECT_EQ(cuda::gemm_plan_counts(cs).plans, 3u);
}

}  // namespace
}  // namespace vlm

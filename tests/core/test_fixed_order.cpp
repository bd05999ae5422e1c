// The reductions whose order is fixed so that every run and both backends give the same
// bits (docs/gpu.md, "Reproducibility"), on the CPU backend, bitwise against
// references written here from the declarations' words, at 1 and 4 threads:
//  - sum_squares (core/ops/elementwise.inc): chunks of kSumSquaresChunk, 32 strided lanes
//    in double per chunk, the lanes combined pairwise by halving (v[i] += v[i + o] for
//    o = 16 .. 1: lane 0 of the warp's xor butterfly), the chunk sums the same way;
//  - embedding_backward (core/ops/embedding.inc): dtable[row] += dout[t] in token order,
//    in f32 (what the CUDA kernel's sorted runs reproduce);
//  - matmul's dGELU epilogue (GemmOpts::dgelu_pre) equals matmul then gelu_backward.
// The CUDA halves are conformance cases (core/opcheck/cases_fast_paths.cpp, tolerance 0).
#include <vector>

#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

// Lane 0 of a 32-lane xor butterfly, computed by in-place halving.
double halving_sum(std::vector<double> v) {
  for (size_t o = 16; o > 0; o /= 2)
    for (size_t i = 0; i < o; ++i) v[i] = v[i] + v[i + o];
  return v[0];
}

float sum_squares_reference(const std::vector<float>& x, float start) {
  const size_t n = x.size(), chunk = size_t(kSumSquaresChunk);
  std::vector<double> chunk_lanes(32, 0.0);
  for (size_t c = 0; c * chunk < n; ++c) {
    std::vector<double> lanes(32, 0.0);
    for (size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i)
      lanes[(i - c * chunk) % 32] += double(x[i]) * double(x[i]);
    chunk_lanes[c % 32] += halving_sum(lanes);
  }
  return start + float(halving_sum(chunk_lanes));
}

class FixedOrder : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    saved_ = thread_budget();
    set_thread_budget(GetParam());
  }
  void TearDown() override { set_thread_budget(saved_); }

 private:
  int saved_ = 1;
};

TEST_P(FixedOrder, SumSquaresInTheDeclaredOrder) {
  Rng rng(11);
  // 1 element, a partial chunk, one chunk, 40 chunks and a tail (> 32: lanes wrap).
  for (int64_t n : {int64_t(1), int64_t(1000), kSumSquaresChunk, 40 * kSumSquaresChunk + 17}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = float(rng.uniform(-3, 3));
    const Tensor out = Tensor::from_vector(std::vector<float>{0.25f}, Shape{1});
    sum_squares(cpu_stream(), out, Tensor::from_vector(x, Shape{n}));
    const float got = to_vector_f32(out)[0], want = sum_squares_reference(x, 0.25f);
    EXPECT_EQ(got, want) << "n=" << n;  // bitwise
    // And the order matters at this size: a plain serial sum is allowed to differ, the
    // value must still be the sum of squares.
    double serial = 0.25;
    for (float v : x) serial += double(v) * double(v);
    EXPECT_NEAR(got, serial, 1e-6 * serial);
  }
}

TEST_P(FixedOrder, EmbeddingBackwardInTokenOrder) {
  Rng rng(12);
  const int64_t V = 7, C = 45, T = 300, offset = 3;  // a shard of rows 3..9 of a 12-row vocabulary
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int32_t& id : ids) id = int32_t(rng.uniform(0, 12));  // many repeats, some outside the shard
  std::vector<float> dout(static_cast<size_t>(T * C)), table(static_cast<size_t>(V * C));
  for (float& v : dout) v = float(rng.uniform(-1, 1));
  for (float& v : table) v = float(rng.uniform(-1, 1));
  std::vector<float> want = table;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = ids[size_t(t)] - offset;
    if (row < 0 || row >= V) continue;
    for (int64_t c = 0; c < C; ++c) want[size_t(row * C + c)] += dout[size_t(t * C + c)];
  }
  const Tensor dtable = Tensor::from_vector(table, Shape{V, C});
  embedding_backward(cpu_stream(), dtable, Tensor::from_vector(dout, Shape{T, C}), Tensor::from_vector(ids, Shape{T}),
                     offset);
  EXPECT_EQ(to_vector_f32(dtable), want);  // bitwise
}

TEST_P(FixedOrder, MatmulDgeluEqualsMatmulThenGeluBackward) {
  Rng rng(13);
  const int64_t M = 37, N = 64, K = 29;
  auto rand = [&](Shape s) {
    Vec v(static_cast<size_t>(s.numel()));
    for (double& x : v) x = rng.uniform(-2, 2);
    return host(v, s, DType::F32);
  };
  const Tensor A = rand(Shape{M, K}), B = rand(Shape{N, K}), pre = rand(Shape{M, N});
  GemmOpts o;
  o.trans_b = true;
  const Tensor plain = zeros(Shape{M, N}, DType::F32), fused = zeros(Shape{M, N}, DType::F32);
  matmul(cpu_stream(), plain, A, B, o);
  const Tensor two_ops = zeros(Shape{M, N}, DType::F32);
  gelu_backward(cpu_stream(), two_ops, pre, plain);
  o.dgelu_pre = &pre;
  matmul(cpu_stream(), fused, A, B, o);
  EXPECT_EQ(to_vector_f32(fused), to_vector_f32(two_ops));
  // Against the formula in double.
  const std::vector<float> a = to_vector_f32(A), b = to_vector_f32(B), x = to_vector_f32(pre), f = to_vector_f32(fused);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(a[size_t(i * K + k)]) * double(b[size_t(j * K + k)]);
      const double u = x[size_t(i * N + j)], s = std::sqrt(2 / M_PI), in = s * (u + 0.044715 * u * u * u);
      const double th = std::tanh(in);
      const double grad = 0.5 * (1 + th) + 0.5 * u * (1 - th * th) * s * (1 + 3 * 0.044715 * u * u);
      EXPECT_NEAR(f[size_t(i * N + j)], acc * grad, 1e-4 * (1 + std::abs(acc))) << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, FixedOrder, ::testing::Values(1, 4),
                         [](const auto& info) { return std::to_string(info.param) + "threads"; });

}  // namespace
}  // namespace vlm::test

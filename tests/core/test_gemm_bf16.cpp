// bf16 products on the CPU's bf16 units (core/cpu/gemm_bf16.h, through blas.h's bf16
// gemm_ld and the matmul op), on a CPU with AVX512_BF16 (skipped, with a line, elsewhere):
//  - every shape class of the kernel (rows and columns past a 12 x 32 tile, odd K, each
//    transpose, alpha and beta, strided rows) against the double sum of the bf16 values:
//    f32 accumulation, so within K * 2^-24 of the sum of |products| (plus beta C);
//  - the matmul op with a bf16 weight (as a bf16 Linear runs it) against the f32
//    reference of the unrounded operands at bf16 tolerance (2^-7 of the scale);
//  - bitwise the same result at 1 and 2 threads, on a product cut into several blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu_threads.h"
#include "core/ops.h"
#include "tests/core/test_util.h"

namespace vlm {
namespace {

using test::cpu_stream;

#define SKIP_WITHOUT_BF16_UNITS()                                                                        \
  if (!cpu::gemm_bf16_units())                                                                           \
  GTEST_SKIP() << "this CPU has no AVX512_BF16: bf16 products run as f32 GEMMs of bf16 values there (" \
               << cpu_backend().description() << ")"

std::vector<bf16> random_bf16(size_t n, uint32_t seed) {
  std::vector<bf16> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = f32_to_bf16(float(s >> 8) / float(1 << 24) * 4.f - 2.f);
  }
  return v;
}

TEST(GemmBf16, MatchesTheDoubleSumOfBf16Values) {
  SKIP_WITHOUT_BF16_UNITS();
  const struct {
    int64_t M, N, K;
  } shapes[] = {{1, 1, 1}, {12, 32, 2}, {13, 33, 3}, {37, 70, 129}, {5, 100, 64}, {30, 7, 300}};
  int checked = 0;
  for (const auto& sh : shapes)
    for (int t = 0; t < 4; ++t)
      for (const auto& ab : {std::pair{1.0, 0.0}, std::pair{0.5, 1.0}, std::pair{-1.0, 0.25}}) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t M = sh.M, N = sh.N, K = sh.K, pad = 3;  // strided rows: ld = width + pad
        const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        const auto A = random_bf16(size_t((ta ? K : M) * lda), 7 + t);
        const auto B = random_bf16(size_t((tb ? N : K) * ldb), 11 + t);
        std::vector<float> C(size_t(M * ldc));
        for (size_t i = 0; i < C.size(); ++i) C[i] = float(std::sin(double(i)));
        const std::vector<float> C0 = C;
        cpu::gemm_ld(ta, tb, M, N, K, ab.first, A.data(), lda, B.data(), ldb, ab.second, C.data(), ldc);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
              const double a = bf16_to_f32(ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)]);
              const double b = bf16_to_f32(tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)]);
              sum += a * b, mag += std::fabs(a * b);
            }
            const double c0 = C0[size_t(i * ldc + j)];
            const double want = ab.first * sum + ab.second * c0;
            const double tol = (double(K) + 2) * 0x1p-24 * (std::fabs(ab.first) * mag + std::fabs(ab.second * c0)) + 1e-30;
            ASSERT_NEAR(C[size_t(i * ldc + j)], want, tol) << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb
                                                           << " alpha " << ab.first << " beta " << ab.second << " at ("
                                                           << i << "," << j << ")";
          }
        for (int64_t i = 0; i < M; ++i)  // the padding of C's rows is not written
          for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(C[size_t(i * ldc + j)], C0[size_t(i * ldc + j)]);
        ++checked;
      }
  EXPECT_EQ(checked, 6 * 4 * 3);
}

TEST(GemmBf16, MatmulWithABf16WeightMatchesTheF32ReferenceAtBf16Tolerance) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t M = 45, N = 70, K = 200;
  test::Vec x(size_t(M * K)), w(size_t(N * K)), bias(static_cast<size_t>(N));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3 * double(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1 * std::cos(0.7 * double(i));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01 * double(i);
  const Tensor X = test::host(x, Shape{M, K}, DType::F32), W = test::host(w, Shape{N, K}, DType::BF16);
  const Tensor b = test::host(bias, Shape{N}, DType::F32);
  Tensor Y = test::zeros(Shape{M, N}, DType::F32);
  GemmOpts o;
  o.trans_b = true;
  o.bias = &b;
  matmul(cpu_stream(), Y, X, W, o);
  const std::vector<float> y = to_vector_f32(Y);
  double scale = 0, err = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double r = bias[size_t(j)];
      for (int64_t k = 0; k < K; ++k) r += x[size_t(i * K + k)] * w[size_t(j * K + k)];
      scale = std::max(scale, std::fabs(r));
      err = std::max(err, std::fabs(r - double(y[size_t(i * N + j)])));
    }
  std::printf("max error %.3e of scale %.3e (bf16: 2^-8 = %.3e relative)\n", err, scale, 0x1p-8);
  EXPECT_LE(err, 0x1p-7 * scale);
  EXPECT_GT(err, 1e-7 * scale) << "no bf16 rounding seen: the operands were not rounded";
}

TEST(GemmBf16, BitwiseTheSameAtOneAndTwoThreads) {
  SKIP_WITHOUT_BF16_UNITS();
  const int64_t M = 256, N = 512, K = 384;
  ASSERT_GT(cpu::gemm_blocks(M, N, K), 1) << "the product must be cut into blocks";
  const auto A = random_bf16(size_t(M * K), 3), B = random_bf16(size_t(N * K), 5);
  std::vector<float> c1(size_t(M * N)), c2(size_t(M * N));
  {
    ThreadBudgetScope one(1);
    cpu::gemm_ld(false, true, M, N, K, 1.0, A.data(), K, B.data(), K, 0.0, c1.data(), N);
  }
  {
    ThreadBudgetScope two(2);
    set_cpu_force_parallel(true);
    cpu::gemm_ld(false, true, M, N, K, 1.0, A.data(), K, B.data(), K, 0.0, c2.data(), N);
    set_cpu_force_parallel(false);
  }
  EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace vlm

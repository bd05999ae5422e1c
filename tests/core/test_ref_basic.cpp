// Forward reference tests (part of test_ops_reference): GEMM, the elementwise ops and
// copy against naive double loops written from the formulas in core/ops/*.inc, in f32 and
// f64, at sizes including 1, 3, 17 and 33.
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

class RefBasic : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  double tol() const { return dt() == DType::F64 ? 1e-12 : 3e-6; }
  Vec r(const Vec& v) const { return rounded(v, dt()); }
};

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST_P(RefBasic, MatmulAllVariants) {
  Rng rng(1);
  const int sizes[][4] = {{1, 1, 1, 1}, {3, 17, 33, 1}, {17, 3, 1, 2}, {33, 33, 17, 3}, {5, 1, 9, 2}};
  for (auto& sz : sizes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int variant = 0; variant < 4; ++variant) {
          // variant: 0 plain 2-D, 1 batched + broadcast B + alpha/beta, 2 bias, 3 bias+gelu
          const int64_t M = sz[0], N = sz[1], K = sz[2], nb = variant == 1 ? sz[3] : 1;
          const bool batched = variant == 1;
          Vec a = r(rng.vec(nb * M * K)), b = r(rng.vec(K * N)), c0 = r(rng.vec(nb * M * N)), bias = r(rng.vec(N));
          Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
          if (batched) sa = ta ? Shape{nb, K, M} : Shape{nb, M, K};
          Tensor A = host(a, sa, dt()), B = host(b, sb, dt());
          Tensor C = host(c0, batched ? Shape{nb, M, N} : Shape{M, N}, dt()), Bias = host(bias, Shape{N}, dt());
          Tensor pre = zeros(C.shape(), dt());
          GemmOpts o;
          o.trans_a = ta, o.trans_b = tb;
          if (batched) o.alpha = 0.5f, o.beta = 0.25f;
          if (variant >= 2) o.bias = &Bias;
          if (variant == 3) o.gelu = true, o.pre_gelu = &pre;
          matmul(cpu_stream(), C, A, B, o);
          Vec ref(static_cast<size_t>(nb * M * N)), ref_pre = ref;
          for (int64_t z = 0; z < nb; ++z)
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k) {
                  double av = ta ? a[z * M * K + k * M + i] : a[z * M * K + i * K + k];
                  double bv = tb ? b[j * K + k] : b[k * N + j];
                  acc += av * bv;
                }
                const size_t idx = size_t((z * M + i) * N + j);
                double v = double(o.alpha) * acc + double(o.beta) * c0[idx];
                if (o.bias) v += bias[size_t(j)];
                ref_pre[idx] = v;
                ref[idx] = o.gelu ? gelu_ref(v) : v;
              }
          SCOPED_TRACE(::testing::Message() << "M" << M << " N" << N << " K" << K << " ta" << ta << " tb" << tb
                                            << " variant" << variant);
          EXPECT_CLOSE(to_vector_f64(C), ref, tol() * double(K + 1));
          if (variant == 3) {
            EXPECT_CLOSE(to_vector_f64(pre), ref_pre, tol() * double(K + 1));
          }
        }
}

TEST_P(RefBasic, MatmulBatchedBroadcastA) {
  Rng rng(2);
  const int64_t nb = 3, M = 4, N = 5, K = 7;
  Vec a = r(rng.vec(M * K)), b = r(rng.vec(nb * K * N));
  Tensor C = zeros(Shape{nb, M, N}, dt());
  matmul(cpu_stream(), C, host(a, Shape{M, K}, dt()), host(b, Shape{nb, K, N}, dt()), GemmOpts{});
  Vec ref(static_cast<size_t>(nb * M * N), 0.0);
  for (int64_t z = 0; z < nb; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) ref[size_t((z * M + i) * N + j)] += a[size_t(i * K + k)] * b[size_t((z * K + k) * N + j)];
  EXPECT_CLOSE(to_vector_f64(C), ref, tol() * 8);
}

TEST_P(RefBasic, BiasBackwardAccumulates) {
  Rng rng(3);
  for (int64_t R : {1, 17, 300})
    for (int64_t N : {1, 3, 33, 130}) {
      Vec g = r(rng.vec(R * N)), d0 = r(rng.vec(N));
      Tensor db = host(d0, Shape{N}, dt());
      bias_backward(cpu_stream(), db, host(g, Shape{R, N}, dt()));
      Vec ref = d0;
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < N; ++j) ref[size_t(j)] += g[size_t(i * N + j)];
      EXPECT_CLOSE(to_vector_f64(db), ref, tol() * double(R));
    }
}

TEST_P(RefBasic, ElementwiseArithmetic) {
  Rng rng(4);
  for (int64_t n : {1, 3, 17, 33, 20000}) {
    Vec a = r(rng.vec(n)), b = r(rng.vec(n));
    Shape s{n};
    Tensor x = host(a, s, dt());
    fill(cpu_stream(), x, 0.375f);
    EXPECT_CLOSE(to_vector_f64(x), Vec(static_cast<size_t>(n), 0.375), 0.0);
    x = host(a, s, dt());
    scale(cpu_stream(), x, -1.5f);
    Vec ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = -1.5 * a[i];
    EXPECT_CLOSE(to_vector_f64(x), ref, tol());
    Tensor A = host(a, s, dt()), B = host(b, s, dt()), out = zeros(s, dt());
    add(cpu_stream(), out, A, B);
    for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + b[i];
    EXPECT_CLOSE(to_vector_f64(out), ref, tol());
    add(cpu_stream(), A, A, B);  // out aliases a
    EXPECT_CLOSE(to_vector_f64(A), ref, tol());
    mul(cpu_stream(), out, host(a, s, dt()), B);
    for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] * b[i];
    EXPECT_CLOSE(to_vector_f64(out), ref, tol());
    Tensor y = host(a, s, dt());
    accumulate(cpu_stream(), y, B, 0.75f);
    for (size_t i = 0; i < a.size(); ++i) ref[i] = a[i] + 0.75 * b[i];
    EXPECT_CLOSE(to_vector_f64(y), ref, tol());
  }
}

TEST_P(RefBasic, BiasAddAndColumnSlices) {
  Rng rng(5);
  for (int64_t N : {1, 3, 17})
    for (int64_t W : {1, 8, 33}) {
      Vec x = r(rng.vec(N * W)), bias = r(rng.vec(W));
      Tensor out = zeros(Shape{N, W}, dt());
      bias_add(cpu_stream(), out, host(x, Shape{N, W}, dt()), host(bias, Shape{W}, dt()));
      Vec ref(x.size());
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < W; ++j) ref[size_t(i * W + j)] = x[size_t(i * W + j)] + bias[size_t(j)];
      EXPECT_CLOSE(to_vector_f64(out), ref, tol());
      const int64_t off = W / 3, w = W - off - (W > 2 ? 1 : 0);
      Tensor part = zeros(Shape{N, w}, dt());
      slice_cols(cpu_stream(), part, host(x, Shape{N, W}, dt()), off);
      Vec rs(static_cast<size_t>(N * w));
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < w; ++j) rs[size_t(i * w + j)] = x[size_t(i * W + off + j)];
      EXPECT_CLOSE(to_vector_f64(part), rs, 0.0);
      Vec src = r(rng.vec(N * w));
      Tensor full = host(x, Shape{N, W}, dt());
      unslice_cols(cpu_stream(), full, host(src, Shape{N, w}, dt()), off);
      Vec ru = x;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < w; ++j) ru[size_t(i * W + off + j)] = src[size_t(i * w + j)];
      EXPECT_CLOSE(to_vector_f64(full), ru, 0.0);
    }
}

// copy: dst = src element for element, across shapes of equal numel (the reference is
// the input itself), including sizes over the CPU's 1 MiB chunk and dst == src.
TEST_P(RefBasic, Copy) {
  Rng rng(9);
  for (int64_t rows : {1, 17, 100003}) {  // [3, rows] -> [3 * rows]; 100003 rows pass 1 MiB
    const int64_t n = 3 * rows;
    Vec x = r(rng.vec(n));
    Tensor dst = host(r(rng.vec(n, 5, 9)), Shape{n}, dt());
    copy(cpu_stream(), dst, host(x, Shape{3, rows}, dt()));
    EXPECT_CLOSE(to_vector_f64(dst), x, 0.0);
    copy(cpu_stream(), dst, dst);  // same memory: nothing changes
    EXPECT_CLOSE(to_vector_f64(dst), x, 0.0);
  }
}

// copy moves bytes: the integer and bf16 dtypes the arithmetic ops do not take.
TEST(RefCopy, IntegerAndBf16Dtypes) {
  std::vector<int32_t> ids{7, -3, 2147483647, 0, -2147483647 - 1, 42};
  Tensor di = host_i32(std::vector<int32_t>(6, 1), Shape{6});
  copy(cpu_stream(), di, host_i32(ids, Shape{2, 3}));
  EXPECT_EQ(std::vector<int32_t>(di.ptr<int32_t>(), di.ptr<int32_t>() + 6), ids);
  Vec v{1.5, -2.25, 3e5, 0.0078125};
  Tensor db = zeros(Shape{4}, DType::BF16);
  copy(cpu_stream(), db, host(v, Shape{2, 2}, DType::BF16));
  EXPECT_CLOSE(to_vector_f64(db), rounded(v, DType::BF16), 0.0);
}

TEST_P(RefBasic, GeluSwigluSumSquares) {
  Rng rng(6);
  for (int64_t n : {1, 3, 33, 20001}) {
    Vec x = r(rng.vec(n, -4, 4)), u = r(rng.vec(n)), g = r(rng.vec(n));
    Shape s{n};
    Tensor out = zeros(s, dt()), d2 = zeros(s, dt());
    gelu_forward(cpu_stream(), out, host(x, s, dt()));
    Vec ref(x.size()), ref2(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = gelu_ref(x[i]);
    EXPECT_CLOSE(to_vector_f64(out), ref, tol());
    Tensor dg = host(g, s, dt());
    gelu_backward(cpu_stream(), dg, host(x, s, dt()), dg);  // din aliases dout
    for (size_t i = 0; i < x.size(); ++i) {
      const double h = 1e-5;  // derivative by a central difference of the reference
      ref[i] = g[i] * (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
    }
    EXPECT_CLOSE(to_vector_f64(dg), ref, std::max(tol(), 1e-8));
    swiglu_forward(cpu_stream(), out, host(x, s, dt()), host(u, s, dt()));
    for (size_t i = 0; i < x.size(); ++i) ref[i] = x[i] / (1 + std::exp(-x[i])) * u[i];
    EXPECT_CLOSE(to_vector_f64(out), ref, tol());
    const Vec fwd = to_vector_f64(out);
    Tensor again = zeros(s, dt());  // the fused backward's recomputed forward value
    swiglu_backward(cpu_stream(), out, d2, again, host(g, s, dt()), host(x, s, dt()), host(u, s, dt()));
    EXPECT_EQ(to_vector_f64(again), fwd) << "swiglu_backward's out is not swiglu_forward's value";
    for (size_t i = 0; i < x.size(); ++i) {
      const double sg = 1 / (1 + std::exp(-x[i]));
      ref[i] = g[i] * u[i] * (sg + x[i] * sg * (1 - sg));
      ref2[i] = g[i] * x[i] * sg;
    }
    EXPECT_CLOSE(to_vector_f64(out), ref, tol());
    EXPECT_CLOSE(to_vector_f64(d2), ref2, tol());
    Tensor ss = host(Vec{0.5}, Shape{1}, dt());
    sum_squares(cpu_stream(), ss, host(x, s, dt()));
    double acc = 0.5;
    for (double v : x) acc += v * v;
    EXPECT_CLOSE(to_vector_f64(ss), Vec{acc}, tol() * 4);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RefBasic, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace vlm::test

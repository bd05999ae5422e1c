// Forward reference tests of the decoding ops (part of test_ops_reference), f32 and f64:
//  - scatter_rows writes exactly the listed rows (skipping negative ones) and leaves
//    every other row of dst untouched;
//  - attention_decode against naive double loops, on caches holding several sequences
//    at odd offsets, with grouped-query heads;
//  - attention_decode over a sequence's first p keys equals row p-1 of the causal
//    attention_forward of that sequence (what makes cached decoding exact).
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

class RefDecode : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  double tol() const { return dt() == DType::F64 ? 1e-12 : 5e-6; }
  Vec r(const Vec& v) const { return rounded(v, dt()); }
};

TEST_P(RefDecode, ScatterRows) {
  Rng rng(21);
  const int64_t R = 9, W = 5;
  const std::vector<int32_t> rows{3, -1, 0, 8};
  Vec dst = r(rng.vec(R * W)), src = r(rng.vec(4 * W));
  Tensor d = host(dst, Shape{R, W}, dt());
  scatter_rows(cpu_stream(), d, host(src, Shape{4, W}, dt()), host_i32(rows, Shape{4}));
  Vec ref = dst;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] >= 0)
      for (int64_t c = 0; c < W; ++c) ref[size_t(rows[i] * W + c)] = src[i * size_t(W) + size_t(c)];
  EXPECT_EQ(to_vector_f64(d), ref);
}

TEST_P(RefDecode, AttentionDecodeMatchesNaive) {
  Rng rng(22);
  struct Cfg {
    std::vector<int32_t> start, len;
    int64_t R, NH, NKV, HS;
  };
  const Cfg cfgs[] = {{{0}, {1}, 1, 1, 1, 4}, {{2, 11, 30}, {5, 19, 1}, 40, 4, 2, 8}, {{7, 0}, {33, 6}, 41, 3, 1, 5}};
  for (const Cfg& cf : cfgs) {
    const int64_t N = int64_t(cf.len.size()), NH = cf.NH, NKV = cf.NKV, HS = cf.HS, R = cf.R;
    const int mx = *std::max_element(cf.len.begin(), cf.len.end());
    Vec q = r(rng.vec(N * NH * HS, -2, 2)), k = r(rng.vec(R * NKV * HS, -2, 2)), v = r(rng.vec(R * NKV * HS));
    Tensor out = zeros(Shape{N, NH, HS}, dt());
    attention_decode(cpu_stream(), out, host(q, Shape{N, NH, HS}, dt()), host(k, Shape{R, NKV, HS}, dt()),
                     host(v, Shape{R, NKV, HS}, dt()), host_i32(cf.start, Shape{N}), host_i32(cf.len, Shape{N}), mx);
    Vec ref(q.size(), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t kh = h / (NH / NKV), j0 = cf.start[size_t(n)], j1 = j0 + cf.len[size_t(n)];
        Vec sc;
        for (int64_t j = j0; j < j1; ++j) {
          double d = 0;
          for (int64_t c = 0; c < HS; ++c) d += q[size_t((n * NH + h) * HS + c)] * k[size_t((j * NKV + kh) * HS + c)];
          sc.push_back(d / std::sqrt(double(HS)));
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double s = 0;
        for (double x : sc) s += std::exp(x - m);
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t c = 0; c < HS; ++c)
            ref[size_t((n * NH + h) * HS + c)] +=
                std::exp(sc[size_t(j - j0)] - m) / s * v[size_t((j * NKV + kh) * HS + c)];
      }
    SCOPED_TRACE(::testing::Message() << "N" << N << " NH" << NH << " NKV" << NKV << " HS" << HS);
    EXPECT_CLOSE(to_vector_f64(out), ref, tol() * 4);
  }
}

TEST_P(RefDecode, AttentionDecodeIsTheLastRowOfCausalAttention) {
  Rng rng(23);
  const std::vector<int32_t> cu{0, 13, 20, 57};  // three sequences, packed
  const int64_t T = cu.back(), NH = 4, NKV = 2, HS = 12;
  Vec q = r(rng.vec(T * NH * HS, -2, 2)), k = r(rng.vec(T * NKV * HS, -2, 2)), v = r(rng.vec(T * NKV * HS));
  const Tensor tq = host(q, Shape{T, NH, HS}, dt()), tk = host(k, Shape{T, NKV, HS}, dt());
  const Tensor tv = host(v, Shape{T, NKV, HS}, dt());
  Tensor full = zeros(Shape{T, NH, HS}, dt()), lse = zeros(Shape{T, NH}, DType::F32);
  attention_forward(cpu_stream(), full, lse, tq, tk, tv, host_i32(cu, Shape{4}), 37, true);
  const Vec want_all = to_vector_f64(full);
  // Every row t of sample b, as a decode step over the keys of [cu[b], t].
  std::vector<int32_t> start, len;
  for (size_t b = 0; b + 1 < cu.size(); ++b)
    for (int32_t t = cu[b]; t < cu[b + 1]; ++t) start.push_back(cu[b]), len.push_back(t - cu[b] + 1);
  Tensor out = zeros(Shape{T, NH, HS}, dt());
  attention_decode(cpu_stream(), out, tq, tk, tv, host_i32(start, Shape{T}), host_i32(len, Shape{T}), 37);
  EXPECT_CLOSE(to_vector_f64(out), want_all, tol());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RefDecode, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace vlm::test

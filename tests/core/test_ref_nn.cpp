// Forward reference tests (part of test_ops_reference): norms, softmax, sigmoid, row_stats, rope,
// attention and embedding against naive double loops from core/ops/*.inc, f32 and
// f64, odd sizes. Saved statistics (mean, rstd, lse) are checked too.
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

class RefNN : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  double tol() const { return dt() == DType::F64 ? 1e-12 : 5e-6; }
  Vec r(const Vec& v) const { return rounded(v, dt()); }
};

TEST_P(RefNN, LayernormAndRmsnorm) {
  Rng rng(11);
  for (int64_t N : {1, 3, 17})
    for (int64_t C : {1, 3, 33, 100}) {
      Vec x = r(rng.vec(N * C, -2, 3)), w = r(rng.vec(C)), b = r(rng.vec(C));
      const float eps = 1e-5f;
      Tensor out = zeros(Shape{N, C}, dt()), mean = zeros(Shape{N}, DType::F32), rstd = zeros(Shape{N}, DType::F32);
      layernorm_forward(cpu_stream(), out, mean, rstd, host(x, Shape{N, C}, dt()), host(w, Shape{C}, dt()),
                        host(b, Shape{C}, dt()), eps);
      Vec ref(x.size()), rm(static_cast<size_t>(N)), rr(static_cast<size_t>(N)), ref2(x.size()), rr2(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) {
        double mu = 0, var = 0, ms = 0;
        for (int64_t c = 0; c < C; ++c) mu += x[size_t(n * C + c)] / double(C);
        for (int64_t c = 0; c < C; ++c) {
          const double xc = x[size_t(n * C + c)];
          var += (xc - mu) * (xc - mu) / double(C);
          ms += xc * xc / double(C);
        }
        rm[size_t(n)] = mu;
        rr[size_t(n)] = 1 / std::sqrt(var + double(eps));
        rr2[size_t(n)] = 1 / std::sqrt(ms + double(eps));
        for (int64_t c = 0; c < C; ++c) {
          const size_t i = size_t(n * C + c);
          ref[i] = (x[i] - mu) * rr[size_t(n)] * w[size_t(c)] + b[size_t(c)];
          ref2[i] = x[i] * rr2[size_t(n)] * w[size_t(c)];
        }
      }
      const double t = std::max(tol(), 1e-6);  // f32 statistics
      EXPECT_CLOSE(to_vector_f64(out), ref, t * 10);
      EXPECT_CLOSE(to_vector_f64(mean), rm, 1e-6);
      EXPECT_CLOSE(to_vector_f64(rstd), rr, 1e-6);
      rmsnorm_forward(cpu_stream(), out, rstd, host(x, Shape{N, C}, dt()), host(w, Shape{C}, dt()), eps);
      EXPECT_CLOSE(to_vector_f64(out), ref2, t * 10);
      EXPECT_CLOSE(to_vector_f64(rstd), rr2, 1e-6);
    }
}

TEST_P(RefNN, SoftmaxForwardBackward) {
  Rng rng(12);
  for (int64_t N : {1, 3, 17})
    for (int64_t C : {1, 2, 33, 257}) {
      Vec x = r(rng.vec(N * C, -30, 30)), g = r(rng.vec(N * C));
      Tensor out = zeros(Shape{N, C}, dt());
      softmax_forward(cpu_stream(), out, host(x, Shape{N, C}, dt()));
      Vec ref(x.size()), dref(x.size());
      for (int64_t n = 0; n < N; ++n) {
        double mx = -1e300, s = 0, dot = 0;
        for (int64_t c = 0; c < C; ++c) mx = std::max(mx, x[size_t(n * C + c)]);
        for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t(n * C + c)] - mx);
        for (int64_t c = 0; c < C; ++c) ref[size_t(n * C + c)] = std::exp(x[size_t(n * C + c)] - mx) / s;
        for (int64_t c = 0; c < C; ++c) dot += g[size_t(n * C + c)] * ref[size_t(n * C + c)];
        for (int64_t c = 0; c < C; ++c) dref[size_t(n * C + c)] = ref[size_t(n * C + c)] * (g[size_t(n * C + c)] - dot);
      }
      EXPECT_CLOSE(to_vector_f64(out), ref, tol());
      Tensor din = zeros(Shape{N, C}, dt());
      softmax_backward(cpu_stream(), din, host(g, Shape{N, C}, dt()), host(ref, Shape{N, C}, dt()));
      EXPECT_CLOSE(to_vector_f64(din), dref, tol());
    }
}

TEST_P(RefNN, RopeForwardBackward) {
  Rng rng(13);
  for (int64_t T : {1, 5, 17})
    for (int64_t NH : {1, 3})
      for (int64_t HS : {2, 8, 34}) {
        Vec x = r(rng.vec(T * NH * HS));
        std::vector<int32_t> pos = rng.ints(T, 0, 300);
        const float theta = 10000.f;
        Shape s{T, NH, HS};
        Tensor out = host(x, s, dt());
        rope_forward(cpu_stream(), out, out, host_i32(pos, Shape{T}), theta);  // in place
        Vec ref(x.size()), back(x.size());
        const int64_t h = HS / 2;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < NH; ++n)
            for (int64_t i = 0; i < HS; ++i) {
              const int64_t fi = i % h;
              const double ang = pos[size_t(t)] * std::pow(10000.0, -2.0 * double(fi) / double(HS));
              const size_t base = size_t((t * NH + n) * HS);
              // rotate_half(x) = [-x2, x1]
              const double rot = i < h ? -x[base + size_t(i + h)] : x[base + size_t(i - h)];
              ref[base + size_t(i)] = x[base + size_t(i)] * std::cos(ang) + rot * std::sin(ang);
            }
        EXPECT_CLOSE(to_vector_f64(out), ref, tol() * 10);
        Tensor din = zeros(s, dt());
        rope_backward(cpu_stream(), din, host(ref, s, dt()), host_i32(pos, Shape{T}), theta);
        EXPECT_CLOSE(to_vector_f64(din), x, tol() * 10);  // the inverse rotation
      }
}

TEST_P(RefNN, AttentionForward) {
  Rng rng(14);
  struct Cfg {
    std::vector<int32_t> lens;
    int64_t NH, NKV, HS;
  };
  const Cfg cfgs[] = {{{1}, 1, 1, 4}, {{3, 17}, 4, 2, 8}, {{5, 1, 9}, 3, 3, 5}, {{33}, 4, 1, 16}};
  for (const Cfg& cf : cfgs)
    for (bool causal : {false, true}) {
      std::vector<int32_t> cu{0};
      int32_t mx = 0;
      for (int32_t l : cf.lens) cu.push_back(cu.back() + l), mx = std::max(mx, l);
      const int64_t T = cu.back(), NH = cf.NH, NKV = cf.NKV, HS = cf.HS;
      Vec q = r(rng.vec(T * NH * HS, -2, 2)), k = r(rng.vec(T * NKV * HS, -2, 2)), v = r(rng.vec(T * NKV * HS));
      Tensor out = zeros(Shape{T, NH, HS}, dt()), lse = zeros(Shape{T, NH}, DType::F32);
      attention_forward(cpu_stream(), out, lse, host(q, Shape{T, NH, HS}, dt()), host(k, Shape{T, NKV, HS}, dt()),
                        host(v, Shape{T, NKV, HS}, dt()), host_i32(cu, Shape{int64_t(cu.size())}), mx, causal);
      Vec ref(q.size(), 0.0), rl(static_cast<size_t>(T * NH));
      for (size_t b = 0; b + 1 < cu.size(); ++b)
        for (int64_t i = cu[b]; i < cu[b + 1]; ++i)
          for (int64_t h = 0; h < NH; ++h) {
            const int64_t kh = h / (NH / NKV), jend = causal ? i + 1 : cu[b + 1];
            Vec sc;
            for (int64_t j = cu[b]; j < jend; ++j) {
              double d = 0;
              for (int64_t c = 0; c < HS; ++c) d += q[size_t((i * NH + h) * HS + c)] * k[size_t((j * NKV + kh) * HS + c)];
              sc.push_back(d / std::sqrt(double(HS)));
            }
            double m = *std::max_element(sc.begin(), sc.end()), s = 0;
            for (double x : sc) s += std::exp(x - m);
            rl[size_t(i * NH + h)] = m + std::log(s);
            for (int64_t j = cu[b]; j < jend; ++j)
              for (int64_t c = 0; c < HS; ++c)
                ref[size_t((i * NH + h) * HS + c)] += std::exp(sc[size_t(j - cu[b])] - m) / s * v[size_t((j * NKV + kh) * HS + c)];
          }
      SCOPED_TRACE(::testing::Message() << "T" << T << " NH" << NH << " NKV" << NKV << " causal " << causal);
      EXPECT_CLOSE(to_vector_f64(out), ref, tol() * 4);
      EXPECT_CLOSE(to_vector_f64(lse), rl, 1e-6);
    }
}

TEST_P(RefNN, EmbeddingShard) {
  Rng rng(15);
  for (int64_t C : {1, 3, 70})
    for (int64_t off : {0, 5}) {
      const int64_t V = 7, T = 19;
      Vec table = r(rng.vec(V * C)), g = r(rng.vec(T * C)), d0 = r(rng.vec(V * C));
      std::vector<int32_t> ids = rng.ints(T, 0, 14);  // some outside the shard
      Tensor out = zeros(Shape{T, C}, dt());
      embedding_forward(cpu_stream(), out, host_i32(ids, Shape{T}), host(table, Shape{V, C}, dt()), off);
      Vec ref(static_cast<size_t>(T * C), 0.0), dref = d0;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = ids[size_t(t)] - off;
        if (row < 0 || row >= V) continue;
        for (int64_t c = 0; c < C; ++c) {
          ref[size_t(t * C + c)] = table[size_t(row * C + c)];
          dref[size_t(row * C + c)] += g[size_t(t * C + c)];
        }
      }
      EXPECT_CLOSE(to_vector_f64(out), ref, 0.0);
      Tensor dt_ = host(d0, Shape{V, C}, dt());
      embedding_backward(cpu_stream(), dt_, host(g, Shape{T, C}, dt()), host_i32(ids, Shape{T}), off);
      EXPECT_CLOSE(to_vector_f64(dt_), dref, tol() * 4);
    }
}

TEST_P(RefNN, SigmoidAndRowStats) {
  Rng rng(17);
  for (int64_t N : {1, 3, 17})
    for (int64_t C : {1, 3, 33, 100}) {
      Vec x = r(rng.vec(N * C, -4, 6)), g = r(rng.vec(N * C)), g3 = r(rng.vec(N * 3));
      Tensor y = zeros(Shape{N, C}, dt()), dy = zeros(Shape{N, C}, dt());
      sigmoid_forward(cpu_stream(), y, host(x, Shape{N, C}, dt()));
      Vec ys(x.size()), dys(x.size());
      for (size_t i = 0; i < x.size(); ++i) ys[i] = 1 / (1 + std::exp(-x[i])), dys[i] = g[i] * ys[i] * (1 - ys[i]);
      EXPECT_CLOSE(to_vector_f64(y), ys, tol());
      sigmoid_backward(cpu_stream(), dy, host(g, Shape{N, C}, dt()), host(ys, Shape{N, C}, dt()));
      EXPECT_CLOSE(to_vector_f64(dy), dys, tol());
      if (C > 1) x[size_t(C - 1)] = x[0] = 7;  // a tied maximum in row 0: the first one gets the gradient
      const double eps = double(1e-6f);  // the op takes eps as a float
      Vec st(size_t(N * 3)), dx(x.size());
      for (int64_t n = 0; n < N; ++n) {
        const double* xr = &x[size_t(n * C)];
        double m = 0, mx = -1e300, v = 0;
        int64_t arg = 0;
        for (int64_t c = 0; c < C; ++c) m += xr[c] / double(C);
        for (int64_t c = 0; c < C; ++c)
          if (xr[c] > mx) mx = xr[c], arg = c;
        for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m) / double(C);
        const double sd = std::sqrt(v + eps);
        st[size_t(n * 3)] = m, st[size_t(n * 3 + 1)] = mx, st[size_t(n * 3 + 2)] = sd;
        for (int64_t c = 0; c < C; ++c)
          dx[size_t(n * C + c)] = g3[size_t(n * 3)] / double(C) + g3[size_t(n * 3 + 2)] * (xr[c] - m) / (double(C) * sd) +
                                  (c == arg ? g3[size_t(n * 3 + 1)] : 0.0);
      }
      Tensor xin = host(x, Shape{N, C}, dt()), o = zeros(Shape{N, 3}, dt()), din = zeros(Shape{N, C}, dt());
      row_stats_forward(cpu_stream(), o, xin, float(eps));
      EXPECT_CLOSE(to_vector_f64(o), st, tol());
      row_stats_backward(cpu_stream(), din, host(g3, Shape{N, 3}, dt()), xin, o);
      EXPECT_CLOSE(to_vector_f64(din), dx, dt() == DType::F64 ? 1e-9 : 2e-5);
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RefNN, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace vlm::test

// Forward reference tests (part of test_ops_reference): cross-entropy (full and the
// four vocab-parallel pieces, with ignore_index), conv2d, avgpool2d and the AdamW
// step, against naive double loops from core/ops/*.inc, f32 and f64, odd sizes.
#include "tests/core/test_util.h"

namespace vlm::test {
namespace {

class RefOther : public ::testing::TestWithParam<DType> {
 protected:
  DType dt() const { return GetParam(); }
  double tol() const { return dt() == DType::F64 ? 1e-12 : 5e-6; }
  Vec r(const Vec& v) const { return rounded(v, dt()); }
};

TEST_P(RefOther, CrossEntropyAndVocabPieces) {
  Rng rng(21);
  const int ignore = -100;
  for (int64_t N : {1, 3, 17})
    for (int64_t V : {1, 5, 33}) {
      // Rows shifted by 0, -800 and +800: a row whose every logit is below exp's range
      // (or above it) must still give its loss, which only the row's max makes possible.
      Vec x = rng.vec(N * V, -8, 8), dl = r(rng.vec(N));
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < V; ++c) x[size_t(n * V + c)] += 800.0 * double((n % 3 + 1) % 3 - 1);
      x = r(x);
      std::vector<int32_t> tg = rng.ints(N, 0, int(V) - 1);
      if (N > 1) tg[1] = ignore;
      Tensor logits = host(x, Shape{N, V}, dt()), targets = host_i32(tg, Shape{N});
      Tensor losses = zeros(Shape{N}, DType::F32), dx = zeros(Shape{N, V}, dt());
      cross_entropy_forward(cpu_stream(), losses, logits, targets, ignore);
      cross_entropy_backward(cpu_stream(), dx, logits, targets, host(dl, Shape{N}, DType::F32), ignore);
      Vec rl(static_cast<size_t>(N), 0.0), rd(x.size(), 0.0), dlf = rounded(dl, DType::F32);
      for (int64_t n = 0; n < N; ++n) {
        if (tg[size_t(n)] == ignore) continue;
        const double mx = *std::max_element(x.begin() + n * V, x.begin() + (n + 1) * V);
        double s = 0;
        for (int64_t c = 0; c < V; ++c) s += std::exp(x[size_t(n * V + c)] - mx);
        rl[size_t(n)] = std::log(s) + mx - x[size_t(n * V + tg[size_t(n)])];
        for (int64_t c = 0; c < V; ++c)
          rd[size_t(n * V + c)] = (std::exp(x[size_t(n * V + c)] - mx) / s - (c == tg[size_t(n)])) * dlf[size_t(n)];
      }
      EXPECT_CLOSE(to_vector_f64(losses), rl, 1e-6);
      EXPECT_CLOSE(to_vector_f64(dx), rd, tol());
      // Vocab-parallel pieces on shards of columns, reduced here by hand (the all-reduces).
      const int64_t V1 = V / 2;
      const int64_t offs[2] = {0, V1}, widths[2] = {V1, V - V1};
      Vec gmax(static_cast<size_t>(N), -1e300), gsum(static_cast<size_t>(N), 0.0), gtl(static_cast<size_t>(N), 0.0);
      std::vector<Tensor> shard(2);
      for (int p = 0; p < 2; ++p) {
        if (widths[p] == 0) continue;
        shard[size_t(p)] = zeros(Shape{N, widths[p]}, dt());
        slice_cols(cpu_stream(), shard[size_t(p)], logits, offs[p]);
        Tensor rm = zeros(Shape{N}, dt());
        vocab_ce_rowmax(cpu_stream(), rm, shard[size_t(p)]);
        Vec m = to_vector_f64(rm);
        for (int64_t n = 0; n < N; ++n) gmax[size_t(n)] = std::max(gmax[size_t(n)], m[size_t(n)]);
      }
      Tensor rowmax = host(gmax, Shape{N}, dt());
      for (int p = 0; p < 2; ++p) {
        if (widths[p] == 0) continue;
        Tensor se = zeros(Shape{N}, dt()), tl = zeros(Shape{N}, dt());
        vocab_ce_sumexp(cpu_stream(), se, tl, shard[size_t(p)], rowmax, targets, offs[p]);
        Vec a = to_vector_f64(se), b = to_vector_f64(tl);
        for (int64_t n = 0; n < N; ++n) gsum[size_t(n)] += a[size_t(n)], gtl[size_t(n)] += b[size_t(n)];
      }
      Tensor sumexp = host(gsum, Shape{N}, dt()), vl = zeros(Shape{N}, dt());
      vocab_ce_loss(cpu_stream(), vl, rowmax, sumexp, host(gtl, Shape{N}, dt()), targets, ignore);
      EXPECT_CLOSE(to_vector_f64(vl), rl, tol() * 4);
      for (int p = 0; p < 2; ++p) {
        if (widths[p] == 0) continue;
        Tensor d = zeros(Shape{N, widths[p]}, dt());
        vocab_ce_backward(cpu_stream(), d, shard[size_t(p)], rowmax, sumexp, targets, host(dlf, Shape{N}, dt()),
                          offs[p], ignore);
        Vec dv = to_vector_f64(d), want(static_cast<size_t>(N * widths[p]));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t c = 0; c < widths[p]; ++c) want[size_t(n * widths[p] + c)] = rd[size_t(n * V + offs[p] + c)];
        EXPECT_CLOSE(dv, want, tol());
      }
    }
}

TEST_P(RefOther, Conv2dForward) {
  Rng rng(22);
  struct Cfg {
    int64_t B, Cin, H, W, Cout, KH, KW;
    int stride, pad;
    bool bias;
  };
  const Cfg cfgs[] = {{1, 1, 1, 1, 1, 1, 1, 1, 0, false}, {2, 3, 7, 5, 4, 3, 3, 1, 1, true},
                      {1, 2, 9, 9, 3, 4, 4, 4, 0, true},   {3, 1, 5, 6, 2, 2, 3, 2, 1, false}};
  for (const Cfg& c : cfgs) {
    const int64_t Ho = (c.H + 2 * c.pad - c.KH) / c.stride + 1, Wo = (c.W + 2 * c.pad - c.KW) / c.stride + 1;
    Vec in = r(rng.vec(c.B * c.Cin * c.H * c.W)), w = r(rng.vec(c.Cout * c.Cin * c.KH * c.KW)), b = r(rng.vec(c.Cout));
    Tensor out = zeros(Shape{c.B, c.Cout, Ho, Wo}, dt());
    conv2d_forward(cpu_stream(), out, host(in, Shape{c.B, c.Cin, c.H, c.W}, dt()),
                   host(w, Shape{c.Cout, c.Cin, c.KH, c.KW}, dt()), c.bias ? host(b, Shape{c.Cout}, dt()) : Tensor(),
                   c.stride, c.pad);
    Vec ref(static_cast<size_t>(c.B * c.Cout * Ho * Wo));
    for (int64_t n = 0; n < c.B; ++n)
      for (int64_t co = 0; co < c.Cout; ++co)
        for (int64_t oy = 0; oy < Ho; ++oy)
          for (int64_t ox = 0; ox < Wo; ++ox) {
            double acc = c.bias ? b[size_t(co)] : 0.0;
            for (int64_t ci = 0; ci < c.Cin; ++ci)
              for (int64_t ky = 0; ky < c.KH; ++ky)
                for (int64_t kx = 0; kx < c.KW; ++kx) {
                  const int64_t y = oy * c.stride - c.pad + ky, x = ox * c.stride - c.pad + kx;
                  if (y < 0 || y >= c.H || x < 0 || x >= c.W) continue;
                  acc += in[size_t(((n * c.Cin + ci) * c.H + y) * c.W + x)] *
                         w[size_t(((co * c.Cin + ci) * c.KH + ky) * c.KW + kx)];
                }
            ref[size_t(((n * c.Cout + co) * Ho + oy) * Wo + ox)] = acc;
          }
    EXPECT_CLOSE(to_vector_f64(out), ref, tol() * 10);
  }
}

TEST_P(RefOther, Avgpool2d) {
  Rng rng(23);
  for (int k : {1, 2, 3})
    for (int stride : {1, 2, 3}) {
      const int64_t B = 2, C = 3, H = 7, W = 8, Ho = (H - k) / stride + 1, Wo = (W - k) / stride + 1;
      Vec x = r(rng.vec(B * C * H * W)), g = r(rng.vec(B * C * Ho * Wo));
      Tensor out = zeros(Shape{B, C, Ho, Wo}, dt()), din = host(rng.vec(B * C * H * W), Shape{B, C, H, W}, dt());
      avgpool2d_forward(cpu_stream(), out, host(x, Shape{B, C, H, W}, dt()), k, stride);
      avgpool2d_backward(cpu_stream(), din, host(g, Shape{B, C, Ho, Wo}, dt()), k, stride);
      Vec ref(static_cast<size_t>(B * C * Ho * Wo), 0.0), dref(x.size(), 0.0);
      for (int64_t p = 0; p < B * C; ++p)
        for (int64_t oy = 0; oy < Ho; ++oy)
          for (int64_t ox = 0; ox < Wo; ++ox)
            for (int i = 0; i < k; ++i)
              for (int j = 0; j < k; ++j) {
                const size_t src = size_t((p * H + oy * stride + i) * W + ox * stride + j), o = size_t((p * Ho + oy) * Wo + ox);
                ref[o] += x[src] / (k * k);
                dref[src] += g[o] / (k * k);
              }
      EXPECT_CLOSE(to_vector_f64(out), ref, tol());
      EXPECT_CLOSE(to_vector_f64(din), dref, tol());
    }
}

TEST_P(RefOther, AdamWStep) {
  Rng rng(24);
  for (int64_t n : {1, 17, 33}) {
    Vec p = r(rng.vec(n)), g = r(rng.vec(n)), m = r(rng.vec(n)), v = r(rng.vec(n, 0, 1));
    AdamWOpts o;
    o.lr = 0.01f, o.beta1 = 0.8f, o.beta2 = 0.99f, o.eps = 1e-6f, o.weight_decay = 0.1f, o.grad_scale = 0.5f, o.step = 3;
    Tensor P = host(p, Shape{n}, dt()), M = host(m, Shape{n}, dt()), Vt = host(v, Shape{n}, dt());
    Tensor copy = zeros(Shape{n}, DType::BF16);
    adamw_step(cpu_stream(), P, host(g, Shape{n}, dt()), M, Vt, copy, o);
    const double b1 = double(o.beta1), b2 = double(o.beta2), lr = double(o.lr);
    Vec rp(p.size()), rm(p.size()), rv(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i] * double(o.grad_scale);
      rm[i] = b1 * m[i] + (1 - b1) * gi;
      rv[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double mh = rm[i] / (1 - std::pow(b1, 3)), vh = rv[i] / (1 - std::pow(b2, 3));
      rp[i] = p[i] - lr * (mh / (std::sqrt(vh) + double(o.eps)) + double(o.weight_decay) * p[i]);
    }
    EXPECT_CLOSE(to_vector_f64(M), rm, tol());
    EXPECT_CLOSE(to_vector_f64(Vt), rv, tol());
    EXPECT_CLOSE(to_vector_f64(P), rp, tol());
    EXPECT_CLOSE(to_vector_f64(copy), rp, 1.0 / 256);  // bf16: 8 significant bits
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RefOther, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace vlm::test

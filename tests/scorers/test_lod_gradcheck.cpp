// f64 finite-difference gradients (tests/core/gradcheck.h) of the LOD tokens
// (scorers/lod_tokens.h): the per-level pooling with the level and position embeddings,
// the straight-through gate and the detail gate (allocation held fixed; the gate's
// reference is tokens * (1 + r_reg - r_reg(r0)) with r0 the point of evaluation), soft
// detail (straight through its soft surrogate), and lod.gate_full_detail=false against
// the default.
#include "tests/core/gradcheck.h"

#include <algorithm>

#include "scorers/lod_tokens.h"
#include "tests/scorers/scorer_test_util.h"

namespace vlm::test {
namespace {

Stream& S() { return cpu_stream(); }

// Fixed allocations with every level present: R = 4 on G = 8 (4 regions, levels 0..2);
// image 0 with budget 13 (one region at level 0, three at level 1), image 1 with 28
// (three at level 1, one at level 2).
std::vector<ImageLod> fixed_lods(const ScorerDims& d) {
  Rng rng(50);
  std::vector<ImageLod> v;
  for (int64_t budget : {13, 28}) {
    LodConfig c;
    c.region = 4, c.min_tokens = 4, c.max_tokens = 64, c.fixed_budget = budget;
    Vec r = rng.vec(d.cells(), 0.05, 0.95);
    v.push_back(LodAllocator(c, d.G).allocate(r.data(), 0));
  }
  return v;
}

TEST(ScorerGrad, PoolingAndEmbeddings) {
  const ScorerDims d = small_dims();
  const std::vector<ImageLod> lods = fixed_lods(d);
  EXPECT_EQ(lods[0].per_level, (std::vector<int64_t>{1, 3, 0}));
  EXPECT_EQ(lods[1].per_level, (std::vector<int64_t>{0, 3, 1}));
  const int64_t B = 2, N = d.cells(), T = LodTokens::total_tokens(lods);
  ParamTable t = table_of(lod_param_specs(d, 3), 51);
  LodTokens lt(d, 4);
  lt.bind(t);
  Rng rng(52);
  GradProblem p;
  p.inputs = {host(rng.vec(B * N * d.d), Shape{B, N, d.d})};
  add_params(p, t);
  std::vector<int64_t> cu;
  p.forward = [&] {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, p.inputs[0]);
    return std::vector<Tensor>{tok};
  };
  p.backward = [&](const std::vector<Tensor>& dout) {
    p.forward();
    t.zero_grads();
    Tensor dr = zeros(Shape{B, N});
    Tensor dF = accumulated(Shape{B, N, d.d}, [&](const Tensor& g) { lt.backward(S(), g, dr, dout[0]); });
    std::vector<Tensor> g{dF};
    for (Tensor& x : grads_of(t)) g.push_back(x);
    return g;
  };
  gradcheck(p, 53);
  EXPECT_EQ(cu, (std::vector<int64_t>{0, 13, 41}));
}

TEST(ScorerGrad, GateWithAllocationFixed) {
  const ScorerDims d = small_dims();
  const std::vector<ImageLod> lods = fixed_lods(d);
  const int64_t B = 2, N = d.cells(), T = LodTokens::total_tokens(lods);
  ParamTable t = table_of(lod_param_specs(d, 3), 60);
  LodTokens lt(d, 4);
  lt.bind(t);
  Rng rng(61);
  Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d});
  const Vec r0 = rng.vec(B * N, 0.1, 0.9);
  GradProblem p;
  p.inputs = {host(r0, Shape{B, N})};
  std::vector<int64_t> cu;
  // the gate's definition: token * (1 + r_reg - stopgrad(r_reg)), stopgrad = value at r0
  auto region_mean = [&](const Vec& r, int64_t b, const LodToken& k) {
    double m = 0;
    const int y0 = (k.y0 / 4) * 4, x0 = (k.x0 / 4) * 4;
    for (int y = y0; y < y0 + 4; ++y)
      for (int x = x0; x < x0 + 4; ++x) m += r[size_t(b * N + y * d.G + x)] / 16.0;
    return m;
  };
  p.forward = [&] {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, F);
    const Vec r = to_vector_f64(p.inputs[0]);
    double* x = tok.ptr<double>();
    int64_t row = 0;
    for (int64_t b = 0; b < B; ++b)
      for (const LodToken& k : lods[size_t(b)].tokens) {
        const double g = 1 + region_mean(r, b, k) - region_mean(r0, b, k);
        for (int64_t c = 0; c < d.d; ++c) x[row * d.d + c] *= g;
        ++row;
      }
    return std::vector<Tensor>{tok};
  };
  p.backward = [&](const std::vector<Tensor>& dout) {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, F);  // at r0 the gate's value is exactly 1
    Tensor dF = zeros(Shape{B, N, d.d});
    Tensor dr = accumulated(Shape{B, N}, [&](const Tensor& g) { lt.backward(S(), dF, g, dout[0]); });
    return std::vector<Tensor>{dr};
  };
  gradcheck(p, 62);
}

// The detail gate (lod.gate=detail): token = coarse + g (fine - coarse) + embeddings with
// g = 1 + (r_reg - mean r) - stopgrad(r_reg - mean r) (mean over the image's cells), fine
// the mean of F over the token's square and coarse
// over its parent square (side 2 x side, aligned), both computed here by loops; level-0
// tokens have no gate. The tokens' value is that of the token gate (g = 1).
TEST(ScorerGrad, DetailGateWithAllocationFixed) {
  const ScorerDims d = small_dims();
  const std::vector<ImageLod> lods = fixed_lods(d);
  const int64_t B = 2, N = d.cells(), T = LodTokens::total_tokens(lods);
  ParamTable t = table_of(lod_param_specs(d, 3), 63);
  LodTokens lt(d, 4, LodGate::Detail), plain(d, 4);
  lt.bind(t), plain.bind(t);
  Rng rng(64);
  Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d});
  const Vec f = to_vector_f64(F), r0 = rng.vec(B * N, 0.1, 0.9);
  auto square_mean = [&](int64_t b, int y0, int x0, int side, int64_t c) {
    double m = 0;
    for (int y = y0; y < y0 + side; ++y)
      for (int x = x0; x < x0 + side; ++x) m += f[size_t((b * N + y * d.G + x) * d.d + c)];
    return m / double(side * side);
  };
  auto relative = [&](const Vec& r, int64_t b, const LodToken& k) {  // r_reg - mean r
    double m = 0, all = 0;
    const int y0 = (k.y0 / 4) * 4, x0 = (k.x0 / 4) * 4;
    for (int y = y0; y < y0 + 4; ++y)
      for (int x = x0; x < x0 + 4; ++x) m += r[size_t(b * N + y * d.G + x)] / 16.0;
    for (int64_t c = 0; c < N; ++c) all += r[size_t(b * N + c)] / double(N);
    return m - all;
  };
  GradProblem p;
  p.inputs = {host(r0, Shape{B, N})};
  std::vector<int64_t> cu;
  p.forward = [&] {
    Tensor tok = zeros(Shape{T, d.d});
    plain.forward(S(), tok, cu, lods, F);  // fine + embeddings
    const Vec r = to_vector_f64(p.inputs[0]);
    double* x = tok.ptr<double>();
    int64_t row = 0;
    for (int64_t b = 0; b < B; ++b)
      for (const LodToken& k : lods[size_t(b)].tokens) {
        if (k.level > 0) {
          const double g1 = relative(r, b, k) - relative(r0, b, k);  // g - 1
          const int ps = 2 * k.side, py = (k.y0 / ps) * ps, px = (k.x0 / ps) * ps;
          for (int64_t c = 0; c < d.d; ++c)
            x[row * d.d + c] += g1 * (square_mean(b, k.y0, k.x0, k.side, c) - square_mean(b, py, px, ps, c));
        }
        ++row;
      }
    return std::vector<Tensor>{tok};
  };
  p.backward = [&](const std::vector<Tensor>& dout) {
    Tensor tok = zeros(Shape{T, d.d}), ref = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, F);
    plain.forward(S(), ref, cu, lods, F);
    EXPECT_EQ(to_vector_f64(tok), to_vector_f64(ref));  // the gate's value is exactly 1
    Tensor dF = zeros(Shape{B, N, d.d});
    Tensor dr = accumulated(Shape{B, N}, [&](const Tensor& g) { lt.backward(S(), dF, g, dout[0]); });
    return std::vector<Tensor>{dr};
  };
  gradcheck(p, 65);
}

// lod.gate_full_detail=false: an image at full detail gives the relevance no gradient,
// the others exactly the default's; the tokens and the features' gradient unchanged.
TEST(ScorerGrad, NoGateAtFullDetail) {
  const ScorerDims d = small_dims();
  std::vector<ImageLod> lods = fixed_lods(d);  // budgets 13 and 28
  LodConfig c;
  c.region = 4, c.min_tokens = 4, c.max_tokens = d.cells(), c.fixed_budget = d.cells();
  Rng rng(66);
  const Vec rf = rng.vec(d.cells(), 0.05, 0.95);
  lods.push_back(LodAllocator(c, d.G).allocate(rf.data(), 0));
  const int64_t B = 3, N = d.cells(), T = LodTokens::total_tokens(lods);
  ASSERT_EQ(int64_t(lods[2].tokens.size()), N);
  ParamTable t = table_of(lod_param_specs(d, 3), 67);
  for (LodGate gate : {LodGate::Token, LodGate::Detail}) {
    LodTokens on(d, 4, gate), off(d, 4, gate, false);
    on.bind(t), off.bind(t);
    Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d}), dtok = host(rng.vec(T * d.d), Shape{T, d.d});
    std::vector<int64_t> cu;
    Tensor ta = zeros(Shape{T, d.d}), tb = zeros(Shape{T, d.d});
    on.forward(S(), ta, cu, lods, F);
    off.forward(S(), tb, cu, lods, F);
    EXPECT_EQ(to_vector_f64(ta), to_vector_f64(tb));
    Tensor dra = zeros(Shape{B, N}), drb = zeros(Shape{B, N}), dFa = zeros(Shape{B, N, d.d}), dFb = zeros(Shape{B, N, d.d});
    on.backward(S(), dFa, dra, dtok);
    off.backward(S(), dFb, drb, dtok);
    EXPECT_EQ(to_vector_f64(dFa), to_vector_f64(dFb));
    const Vec a = to_vector_f64(dra), b = to_vector_f64(drb);
    double full = 0;
    for (int64_t i = 0; i < B * N; ++i) {
      if (i < 2 * N) {
        EXPECT_EQ(b[size_t(i)], a[size_t(i)]) << i;  // below full detail: the default's
      } else {
        EXPECT_EQ(b[size_t(i)], 0.0) << i;
        full += std::fabs(a[size_t(i)]);
      }
    }
    EXPECT_GT(full, 1e-8);  // the default does give the full-detail image a gradient
  }
}

// Soft detail (lod.gate=soft, a soft step): every region of G = 8 at its finest level
// (R = 4: 16 tokens each), the detail mixed in by the hard mix (image 0 with k = 1.6: one
// region at 1, one at 0.6; image 1 with k = 3). The tokens against the plain pooling
// (fine + embeddings) plus (mix - 1)(fine - region mean), computed by loops; the
// gradients of F and the parameters against finite differences of that function, and
// the gradient of r against finite differences of its soft surrogate, the same tokens
// with k softmax(rho / tau) for mix (straight through: for a loss linear in the tokens
// the two gradients are equal).
TEST(ScorerGrad, SoftDetailStraightThroughItsSurrogate) {
  const ScorerDims d = small_dims();
  const int R = 4;
  const int64_t B = 2, N = d.cells();
  LodConfig c;
  c.region = R, c.min_tokens = 4, c.max_tokens = 64, c.gate = LodGate::Soft, c.soft_temperature = 0.05;
  Rng rng(66);
  const Vec r0 = rng.vec(B * N, 0.05, 0.95);
  std::vector<ImageLod> lods;
  for (int64_t b = 0; b < B; ++b) {
    LodConfig::Step step;
    step.budget = b == 0 ? 28 : 49, step.soft = true;
    lods.push_back(LodAllocator(c, d.G).allocate(r0.data() + b * N, 0, step));
    ASSERT_EQ(lods.back().tokens.size(), size_t(N));
    EXPECT_EQ(lods.back().per_level, (std::vector<int64_t>{0, 0, 4}));
  }
  EXPECT_DOUBLE_EQ(lods[0].k, 1.6);
  EXPECT_DOUBLE_EQ(lods[1].k, 3.0);
  for (const ImageLod& l : lods) {  // hard: floor(k) ones, then the fraction, then zeros
    std::vector<double> m = l.mix;
    std::sort(m.rbegin(), m.rend());
    const std::vector<double> want = l.k == 3.0 ? std::vector<double>{1, 1, 1, 0} : std::vector<double>{1, 0.6, 0, 0};
    for (size_t j = 0; j < m.size(); ++j) EXPECT_NEAR(m[j], want[j], 1e-12);
  }
  const int64_t T = LodTokens::total_tokens(lods);
  ParamTable t = table_of(lod_param_specs(d, 3), 67);
  LodTokens lt(d, R, LodGate::Soft), plain(d, R);
  lt.bind(t), plain.bind(t);
  Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d});
  const Vec f = to_vector_f64(F);
  std::vector<int64_t> cu;
  {  // the tokens, by loops
    Tensor tok = zeros(Shape{T, d.d}), ref = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, F);
    std::vector<ImageLod> hard = lods;
    for (ImageLod& l : hard) l.mix.clear(), l.share.clear();
    plain.forward(S(), ref, cu, hard, F);
    const Vec a = to_vector_f64(tok), e = to_vector_f64(ref);
    int64_t row = 0;
    for (int64_t b = 0; b < B; ++b)
      for (const LodToken& k : lods[size_t(b)].tokens) {
        const double m = lods[size_t(b)].mix[size_t(k.region)];
        const int ry = (k.y0 / R) * R, rx = (k.x0 / R) * R;
        for (int64_t ch = 0; ch < d.d; ++ch) {
          double mean = 0;
          for (int y = ry; y < ry + R; ++y)
            for (int x = rx; x < rx + R; ++x) mean += f[size_t((b * N + y * d.G + x) * d.d + ch)] / double(R * R);
          const double fine = f[size_t((b * N + k.y0 * d.G + k.x0) * d.d + ch)];  // side 1: the cell
          EXPECT_NEAR(a[size_t(row * d.d + ch)], e[size_t(row * d.d + ch)] + (m - 1.0) * (fine - mean), 1e-12);
        }
        ++row;
      }
  }
  // The surrogate: mix = k share, recomputed from the (perturbed) r. F and the
  // parameters: the hard function's own gradients, against its finite differences.
  const auto surrogate = [&](const Tensor& r_in) {
    const Vec r = to_vector_f64(r_in);
    std::vector<ImageLod> s = lods;
    for (int64_t b = 0; b < B; ++b) {
      ImageLod& l = s[size_t(b)];
      soft_mix(r.data() + b * N, d.G, R, l.k, 0.05, l);
      for (size_t j = 0; j < l.mix.size(); ++j) l.mix[j] = l.k * l.share[j];
    }
    return s;
  };
  GradProblem hard;
  hard.inputs = {F};
  add_params(hard, t);
  hard.forward = [&] {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, hard.inputs[0]);
    return std::vector<Tensor>{tok};
  };
  hard.backward = [&](const std::vector<Tensor>& dout) {
    hard.forward();
    t.zero_grads();
    Tensor dF = accumulated(Shape{B, N, d.d}, [&](const Tensor& g) { lt.backward(S(), g, zeros(Shape{B, N}), dout[0]); });
    std::vector<Tensor> g{dF};
    for (Tensor& x : grads_of(t)) g.push_back(x);
    return g;
  };
  gradcheck(hard, 68);
  // r: the hard tokens' backward against finite differences of the surrogate.
  GradProblem soft;
  soft.inputs = {host(r0, Shape{B, N})};
  soft.forward = [&] {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, surrogate(soft.inputs[0]), F);
    return std::vector<Tensor>{tok};
  };
  soft.backward = [&](const std::vector<Tensor>& dout) {
    Tensor tok = zeros(Shape{T, d.d});
    lt.forward(S(), tok, cu, lods, F);
    Tensor dF = zeros(Shape{B, N, d.d});
    return std::vector<Tensor>{accumulated(Shape{B, N}, [&](const Tensor& g) { lt.backward(S(), dF, g, dout[0]); })};
  };
  gradcheck(soft, 69);
}

}  // namespace
}  // namespace vlm::test

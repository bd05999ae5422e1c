// The perspectival scorer against the propositional one on a directly computed
// centre-surround, then f64 finite-difference gradients (tests/core/gradcheck.h) of each scorer (features,
// query and every parameter), the balancer, the per-level pooling with the level and
// position embeddings, the straight-through gate and the detail gate (allocation held fixed; the gate's
// reference is tokens * (1 + r_reg - r_reg(r0)) with r0 the point of evaluation), soft
// detail (straight through its soft surrogate); then
// lod.gate_full_detail=false against the default; the whole stage at TP=1: every scorer and balancer parameter gets a non-zero gradient
// through the gate from a loss on the tokens; scorers.query_norm against the stage
// given the normalised query (the RMS norm's Jacobian written out).
#include "tests/core/gradcheck.h"

#include <algorithm>

#include "scorers/balancer.h"
#include "scorers/lod_tokens.h"
#include "scorers/stage.h"
#include "tests/scorers/scorer_test_util.h"
#include "tests/support/mpi.h"

namespace vlm::test {
namespace {

Stream& S() { return cpu_stream(); }

ParamTable table_of(std::vector<ParamSpec> specs, uint64_t seed) {
  ParamTable t(std::move(specs), 1, 0, DType::F64);
  t.allocate(cpu_backend());
  fill_params(t, seed);
  return t;
}

// Inputs = extra tensors followed by every parameter's value (perturbed in place); the
// backward returns the extra gradients followed by every parameter's gradient.
void add_params(GradProblem& p, const ParamTable& t) {
  for (const Param& q : t.params()) p.inputs.push_back(q.value);
}
std::vector<Tensor> grads_of(ParamTable& t) {
  std::vector<Tensor> g;
  for (const Param& q : t.params()) g.push_back(to_host(q.grad));
  return g;
}

TEST(ScorerGrad, EachScorer) {
  const ScorerDims d = small_dims();
  const int64_t B = 2, N = d.cells();
  for (int k = 0; k < kNumScorers; ++k) {
    SCOPED_TRACE(scorer_name(ScorerKind(k)));
    ParamTable t = table_of(scorer_param_specs(ScorerKind(k), d), 10 + uint64_t(k));
    const std::unique_ptr<Scorer> sc = make_scorer(ScorerKind(k), d);
    sc->bind(t);
    Rng rng(20 + uint64_t(k));
    GradProblem p;
    p.inputs = {host(rng.vec(B * N * d.d), Shape{B, N, d.d}), host(rng.vec(B * kTextureChannels * N), Shape{B, kTextureChannels, N}),
                host(rng.vec(B * d.dq), Shape{B, d.dq})};
    add_params(p, t);
    p.forward = [&] {
      Tensor s = zeros(Shape{B, N});
      sc->forward(S(), s, p.inputs[0], p.inputs[1], p.inputs[2]);
      return std::vector<Tensor>{s};
    };
    p.backward = [&](const std::vector<Tensor>& dout) {
      p.forward();
      t.zero_grads();
      Tensor dF, dq;
      dF = accumulated(Shape{B, N, d.d}, [&](const Tensor& gF) {
        dq = accumulated(Shape{B, d.dq}, [&](const Tensor& gq) { sc->backward(S(), dout[0], gF, gq); });
      });
      std::vector<Tensor> g{dF, Tensor{}, k == int(ScorerKind::Participatory) ? dq : Tensor{}};
      for (Tensor& x : grads_of(t)) g.push_back(x);
      return g;
    };
    gradcheck(p, 30 + uint64_t(k));
  }
}

TEST(ScorerGrad, PerspectivalIsPropositionalOnCentreSurround) {
  // independent reference of the centre-surround: X = F - mean of the clipped k x k window
  ScorerDims d = small_dims();
  d.k = 5;
  const int64_t B = 2, N = d.cells(), G = d.G, h = d.k / 2;
  ParamTable tp = table_of(scorer_param_specs(ScorerKind::Perspectival, d), 80);
  ParamTable tq = table_of(scorer_param_specs(ScorerKind::Propositional, d), 81);
  for (size_t i = 0; i < tp.params().size(); ++i) copy_tensor(tq.params()[i].value, tp.params()[i].value);
  const std::unique_ptr<Scorer> persp = make_scorer(ScorerKind::Perspectival, d);
  const std::unique_ptr<Scorer> prop = make_scorer(ScorerKind::Propositional, d);
  persp->bind(tp);
  prop->bind(tq);
  Rng rng(82);
  const Vec f = rng.vec(B * N * d.d);
  Vec x(f.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t y = 0; y < G; ++y)
      for (int64_t c = 0; c < G; ++c)
        for (int64_t e = 0; e < d.d; ++e) {
          double m = 0;
          int n = 0;
          for (int64_t yy = std::max<int64_t>(0, y - h); yy <= std::min(G - 1, y + h); ++yy)
            for (int64_t cc = std::max<int64_t>(0, c - h); cc <= std::min(G - 1, c + h); ++cc, ++n)
              m += f[size_t(((b * N) + yy * G + cc) * d.d + e)];
          const size_t i = size_t(((b * N) + y * G + c) * d.d + e);
          x[i] = f[i] - m / n;
        }
  Tensor tex = host(rng.vec(B * kTextureChannels * N), Shape{B, kTextureChannels, N}), q = zeros(Shape{B, d.dq});
  Tensor s1 = zeros(Shape{B, N}), s2 = zeros(Shape{B, N});
  persp->forward(S(), s1, host(f, Shape{B, N, d.d}), tex, q);
  prop->forward(S(), s2, host(x, Shape{B, N, d.d}), tex, q);
  EXPECT_CLOSE(to_vector_f64(s1), to_vector_f64(s2), 1e-12);
}

TEST(ScorerGrad, Balancer) {
  const ScorerDims d = small_dims();
  const int64_t B = 3, N = d.cells();
  ParamTable t = table_of(balancer_param_specs(d), 40);
  Balancer bal(d);
  bal.bind(t);
  Rng rng(41);
  GradProblem p;
  p.inputs = {host(rng.vec(B * kNumScorers * N, -2, 2), Shape{B, kNumScorers, N}), host(rng.vec(B * d.dq), Shape{B, d.dq})};
  add_params(p, t);
  p.forward = [&] {
    Tensor r = zeros(Shape{B, N});
    bal.forward(S(), r, p.inputs[0], p.inputs[1]);
    return std::vector<Tensor>{r};
  };
  p.backward = [&](const std::vector<Tensor>& dout) {
    p.forward();
    t.zero_grads();
    Tensor dS = garbage(Shape{B, kNumScorers, N});
    Tensor dq = accumulated(Shape{B, d.dq}, [&](const Tensor& g) { bal.backward(S(), dS, g, dout[0]); });
    std::vector<Tensor> g{dS, dq};
    for (Tensor& x : grads_of(t)) g.push_back(x);
    return g;
  };
  gradcheck(p, 42);
}

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

TEST(ScorerGrad, StageGivesEveryScorerAndTheBalancerAGradient) {
  ScorerOptions o;
  o.lod.region = 4, o.lod.min_tokens = 4, o.lod.max_tokens = 40;
  const ScorerDims d = small_dims();
  o.scorers.hidden = d.hidden, o.scorers.k = d.k;
  auto comm = self_comm();
  RelevanceStage stage(o, d, *comm);
  ParamTable t = table_of(stage.param_specs(), 70);
  stage.bind(t);
  const int64_t B = 2, N = d.cells();
  Rng rng(71);
  Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d}), dF = zeros(Shape{B, N, d.d});
  GivenFeatures enc(F, dF);
  Tensor tex = host(rng.vec(B * kTextureChannels * N), Shape{B, kTextureChannels, N});
  Tensor query = host(rng.vec(B * d.dq), Shape{B, d.dq});
  stage.forward(S(), enc, tex, query, {true, false}, 1);
  const Tensor& tok = stage.tokens();
  // tokens have the value of the ungated tokens: the gate is exactly 1
  LodTokens lt(d, 4);
  lt.bind(t);
  Tensor ref = zeros(tok.shape());
  std::vector<int64_t> cu;
  lt.forward(S(), ref, cu, stage.allocations(), F);
  EXPECT_EQ(to_vector_f64(ref), to_vector_f64(tok));
  EXPECT_EQ(cu, stage.offsets());
  Tensor dtok = host(rng.vec(tok.numel()), tok.shape()), dquery = garbage(Shape{B, d.dq});
  t.zero_grads();
  stage.backward(S(), enc, dquery, dtok);
  for (const Param& p : t.params()) {
    double s = 0;
    for (double v : to_vector_f64(p.grad)) s += std::fabs(v);
    EXPECT_GT(s, 1e-8) << p.spec.name << " has no gradient";
  }
  const Vec dq = to_vector_f64(dquery);
  double row0 = 0, row1 = 0;
  for (int64_t c = 0; c < d.dq; ++c) row0 += std::fabs(dq[size_t(c)]), row1 += std::fabs(dq[size_t(d.dq + c)]);
  EXPECT_GT(row0, 0);   // image 0 has a prompt: its query gets the gradient
  EXPECT_EQ(row1, 0);   // image 1 has none: the default query gets it (checked above)
}

// scorers.query_norm against the stage without it given the query normalised by hand
// (q / sqrt(mean(q^2) + 1e-6), and the default query likewise): the same relevance and
// tokens, and the query gradients (both the prompt's rows and the default query's) the
// RMS norm's vector-Jacobian product of the other stage's, rstd (g - y mean(g y)).
TEST(ScorerGrad, QueryNormIsTheStageOnTheNormalisedQuery) {
  const ScorerDims d = small_dims();
  ScorerOptions o;
  o.lod.region = 4, o.lod.min_tokens = 4, o.lod.max_tokens = 40;
  o.scorers.hidden = d.hidden, o.scorers.k = d.k;
  ScorerOptions on = o;
  on.scorers.query_norm = true;
  auto comm = self_comm();
  RelevanceStage plain(o, d, *comm), normed(on, d, *comm);
  ParamTable tp = table_of(plain.param_specs(), 72), tn = table_of(normed.param_specs(), 72);
  const int64_t B = 3, N = d.cells(), dq = d.dq;
  const std::vector<bool> prompt{true, false, true};
  Rng rng(73);
  const Vec qraw = rng.vec(B * dq);
  const Vec q0raw = to_vector_f64(tn.get("scorers.default_query").value);
  const auto rms_norm = [&](const double* x) {
    double m = 0;
    for (int64_t j = 0; j < dq; ++j) m += x[j] * x[j] / double(dq);
    const double rstd = 1.0 / std::sqrt(m + 1e-6);
    Vec y(static_cast<size_t>(dq));
    for (int64_t j = 0; j < dq; ++j) y[size_t(j)] = x[j] * rstd;
    return std::make_pair(y, rstd);
  };
  Vec qhat(size_t(B * dq));
  for (int64_t b = 0; b < B; ++b) {
    const Vec y = rms_norm(qraw.data() + b * dq).first;
    std::copy(y.begin(), y.end(), qhat.begin() + b * dq);
  }
  const auto [q0hat, q0rstd] = rms_norm(q0raw.data());
  copy(S(), tp.get("scorers.default_query").value, host(q0hat, Shape{dq}));
  plain.bind(tp), normed.bind(tn);
  Tensor F = host(rng.vec(B * N * d.d), Shape{B, N, d.d}), tex = host(rng.vec(B * kTextureChannels * N), Shape{B, kTextureChannels, N});
  Tensor dFp = zeros(Shape{B, N, d.d}), dFn = zeros(Shape{B, N, d.d});
  GivenFeatures ep(F, dFp), en(F, dFn);
  plain.forward(S(), ep, tex, host(qhat, Shape{B, dq}), prompt, 1);
  normed.forward(S(), en, tex, host(qraw, Shape{B, dq}), prompt, 1);
  const Vec rp = to_vector_f64(plain.relevance()), rn = to_vector_f64(normed.relevance());
  for (size_t i = 0; i < rp.size(); ++i) EXPECT_NEAR(rn[i], rp[i], 1e-12) << "r " << i;
  EXPECT_EQ(plain.offsets(), normed.offsets());
  const Vec kp = to_vector_f64(plain.tokens()), kn = to_vector_f64(normed.tokens());
  ASSERT_EQ(kp.size(), kn.size());
  for (size_t i = 0; i < kp.size(); ++i) EXPECT_NEAR(kn[i], kp[i], 1e-12) << "token " << i;
  const Vec dtok = rng.vec(int64_t(kp.size()));
  Tensor dqp = garbage(Shape{B, dq}), dqn = garbage(Shape{B, dq});
  tp.zero_grads(), tn.zero_grads();
  plain.backward(S(), ep, dqp, host(dtok, plain.tokens().shape()));
  normed.backward(S(), en, dqn, host(dtok, normed.tokens().shape()));
  // The RMS norm's vector-Jacobian product at x with output gradient g.
  const auto vjp = [&](const double* x, const double* g) {
    const auto [y, rstd] = rms_norm(x);
    double gy = 0;
    for (int64_t j = 0; j < dq; ++j) gy += g[j] * y[size_t(j)] / double(dq);
    Vec dx(static_cast<size_t>(dq));
    for (int64_t j = 0; j < dq; ++j) dx[size_t(j)] = rstd * (g[j] - y[size_t(j)] * gy);
    return dx;
  };
  const Vec gp = to_vector_f64(dqp), gn = to_vector_f64(dqn);
  for (int64_t b = 0; b < B; ++b) {
    const Vec want = prompt[size_t(b)] ? vjp(qraw.data() + b * dq, gp.data() + b * dq) : Vec(size_t(dq), 0.0);
    for (int64_t j = 0; j < dq; ++j) EXPECT_NEAR(gn[size_t(b * dq + j)], want[size_t(j)], 1e-10) << b << " " << j;
  }
  const Vec g0p = to_vector_f64(tp.get("scorers.default_query").grad), g0n = to_vector_f64(tn.get("scorers.default_query").grad);
  const Vec want0 = vjp(q0raw.data(), g0p.data());
  double norm0 = 0;
  for (int64_t j = 0; j < dq; ++j) {
    EXPECT_NEAR(g0n[size_t(j)], want0[size_t(j)], 1e-10) << "default query " << j;
    norm0 += std::fabs(want0[size_t(j)]);
  }
  EXPECT_GT(norm0, 1e-8);  // the default query's row was used (image 1) and has a gradient
  // Every other parameter's gradient is the same.
  for (const Param& p : tn.params()) {
    if (p.spec.name == "scorers.default_query") continue;
    const Vec a = to_vector_f64(p.grad), b = to_vector_f64(tp.get(p.spec.name).grad);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-10) << p.spec.name << " " << i;
  }
}

}  // namespace
}  // namespace vlm::test

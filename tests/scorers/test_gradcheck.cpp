// The perspectival scorer against the propositional one on a directly computed
// centre-surround, then f64 finite-difference gradients (tests/core/gradcheck.h) of each
// scorer (features, query and every parameter) and the balancer; the whole stage at
// TP=1: every scorer and balancer parameter gets a non-zero gradient through the gate
// from a loss on the tokens; scorers.query_norm against the stage given the normalised
// query (the RMS norm's Jacobian written out). The LOD tokens' gradients:
// tests/scorers/test_lod_gradcheck.cpp.
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

// The balancer's forward and backward (scorers/balancer.h): row_stats, a 2-layer MLP,
// softmax, a batched matmul that mixes the maps, sigmoid.
#include "scorers/balancer.h"

#include "core/ops.h"
#include "scorers/scratch.h"

namespace vlm {
namespace {

GemmOpts opts(bool ta, bool tb, float beta = 0.f, const Tensor* bias = nullptr) {
  GemmOpts o;
  o.trans_a = ta, o.trans_b = tb, o.beta = beta, o.bias = bias;
  return o;
}

}  // namespace

std::vector<ParamSpec> balancer_param_specs(const ScorerDims& d) {
  const float sd = 0.02f;
  return {param_spec("scorers.balancer.v1s", Shape{d.hidden, 3 * kNumScorers}, -1, InitKind::Normal, sd),
          param_spec("scorers.balancer.v1q", Shape{d.hidden, d.dq}, -1, InitKind::Normal, sd),
          param_spec("scorers.balancer.c1", Shape{d.hidden}, -1, InitKind::Zeros),
          param_spec("scorers.balancer.v2", Shape{kNumScorers, d.hidden}, -1, InitKind::Normal, sd),
          param_spec("scorers.balancer.c2", Shape{kNumScorers}, -1, InitKind::Zeros)};
}

void Balancer::bind(const ParamTable& t) {
  auto get = [&](const char* w, Tensor& v, Tensor& g) {
    const Param& p = t.get(cat("scorers.balancer.", w));
    v = p.value, g = p.grad;
  };
  get("v1s", v1s_, dv1s_);
  get("v1q", v1q_, dv1q_);
  get("c1", c1_, dc1_);
  get("v2", v2_, dv2_);
  get("c2", c2_, dc2_);
}

void Balancer::forward(Stream& st, const Tensor& r, const Tensor& S, const Tensor& q) {
  const int64_t B = S.size(0), N = dims_.cells(), K = kNumScorers, h = dims_.hidden;
  const DType dt = S.dtype();
  const DeviceKind dev = S.device();
  require_shape(S, Shape{B, K, N}, "balancer maps S");
  require_shape(q, Shape{B, dims_.dq}, "balancer query q");
  require_shape(r, Shape{B, N}, "relevance r");
  S_ = S, q_ = q;
  scratch(stats_, dev, Shape{B, 3 * K}, dt);
  scratch(pre_, dev, Shape{B, h}, dt);
  scratch(h_, dev, Shape{B, h}, dt);
  scratch(a_, dev, Shape{B, K}, dt);
  scratch(w_, dev, Shape{B, K}, dt);
  scratch(z_, dev, Shape{B, N}, dt);
  row_stats_forward(st, stats_.view(Shape{B * K, 3}), S.view(Shape{B * K, N}), kStatsEps);
  matmul(st, pre_, stats_, v1s_, opts(false, true, 0.f, &c1_));
  matmul(st, pre_, q, v1q_, opts(false, true, 1.f));
  gelu_forward(st, h_, pre_);
  matmul(st, a_, h_, v2_, opts(false, true, 0.f, &c2_));
  softmax_forward(st, w_, a_);
  matmul(st, z_.view(Shape{B, 1, N}), w_.view(Shape{B, 1, K}), S, opts(false, false));
  sigmoid_forward(st, r, z_);
  r_ = r;
}

void Balancer::backward(Stream& st, const Tensor& dS, const Tensor& dq, const Tensor& dr) {
  const int64_t B = S_.size(0), N = dims_.cells(), K = kNumScorers, h = dims_.hidden;
  const DType dt = S_.dtype();
  const DeviceKind dev = S_.device();
  require_shape(dS, Shape{B, K, N}, "balancer dS");
  require_shape(dr, Shape{B, N}, "balancer dr");
  scratch(dz_, dev, Shape{B, N}, dt);
  scratch(dw_, dev, Shape{B, K}, dt);
  scratch(dh_, dev, Shape{B, h}, dt);
  scratch(dstats_, dev, Shape{B, 3 * K}, dt);
  scratch(dtmp_, dev, Shape{B, K, N}, dt);
  sigmoid_backward(st, dz_, dr, r_);
  // z = w S: dw = dz S^T, dS = w^T dz (the mixing path)
  matmul(st, dw_.view(Shape{B, 1, K}), dz_.view(Shape{B, 1, N}), S_, opts(false, true));
  matmul(st, dS, w_.view(Shape{B, 1, K}), dz_.view(Shape{B, 1, N}), opts(true, false));
  softmax_backward(st, dw_, dw_, w_);  // dw_ now holds da
  const bool weights = dv2_.defined();  // false: frozen (nn/param_table.h)
  if (weights) matmul(st, dv2_, dw_, h_, opts(true, false, 1.f));
  if (weights) bias_backward(st, dc2_, dw_);
  matmul(st, dh_, dw_, v2_, opts(false, false));
  gelu_backward(st, dh_, pre_, dh_);
  if (weights) {
    matmul(st, dv1s_, dh_, stats_, opts(true, false, 1.f));
    matmul(st, dv1q_, dh_, q_, opts(true, false, 1.f));
    bias_backward(st, dc1_, dh_);
  }
  matmul(st, dq, dh_, v1q_, opts(false, false, 1.f));
  matmul(st, dstats_, dh_, v1s_, opts(false, false));
  // the statistics path
  row_stats_backward(st, dtmp_.view(Shape{B * K, N}), dstats_.view(Shape{B * K, 3}), S_.view(Shape{B * K, N}),
                     stats_.view(Shape{B * K, 3}));
  accumulate(st, dS, dtmp_, 1.f);
}

}  // namespace vlm

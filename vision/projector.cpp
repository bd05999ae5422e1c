// Projector: the 2-layer GELU MLP d_v -> C; see projector.h.
#include "vision/projector.h"

#include <vector>

#include "base/error.h"
#include "core/ops.h"
#include "nn/init.h"

namespace vlm {

Projector::Projector(int64_t d_in, int64_t d_out, float init_std, Backend& backend, int64_t max_tokens, DType dtype,
                     bool grads, Precision precision, DpSharding dp)
    : d_in_(d_in), d_out_(d_out), max_tokens_(max_tokens) {
  VLM_REQUIRE(d_in >= 1 && d_out >= 1 && max_tokens >= 1, "projector: widths ", d_in, " -> ", d_out, " for ",
              max_tokens, " tokens (expected positive sizes)");
  std::vector<ParamSpec> specs{param_spec(kProjector1Weight, Shape{d_out, d_in}, -1, InitKind::Normal, init_std),
                               param_spec(kProjector1Bias, Shape{d_out}, -1, InitKind::Zeros),
                               param_spec(kProjector2Weight, Shape{d_out, d_out}, -1, InitKind::Normal, init_std),
                               param_spec(kProjector2Bias, Shape{d_out}, -1, InitKind::Zeros)};
  params_ = std::make_unique<ParamTable>(std::move(specs), 1, 0, dtype);
  if (precision == Precision::BF16) params_->add_bf16_working_copy();
  params_->allocate(backend, grads, dp);
  l1_ = Linear::bind(*params_, kProjector1Weight, kProjector1Bias);
  l2_ = Linear::bind(*params_, kProjector2Weight, kProjector2Bias);
  using R = ActPlan::Rows;
  acts_.add(&h_, R::T, {d_out});
  acts_.add(&a_, R::T, {d_out});
  acts_.add(&da_, R::T, {d_out});
  acts_.allocate(backend, max_tokens, max_tokens, dtype);
}

void Projector::init(uint64_t seed) { init_params(*params_, seed); }

void Projector::forward(Stream& s, const Tensor& y, const Tensor& x) {
  const int64_t N = x.size(0);
  VLM_REQUIRE(N >= 1 && N <= max_tokens_, "projector: ", N, " tokens, planned for 1 to ", max_tokens_);
  require_shape(x, Shape{N, d_in_}, "projector input");
  require_shape(y, Shape{N, d_out_}, "projector output");
  acts_.cut(N, N);
  last_N_ = N;
  l1_.forward(s, a_, x, h_);  // h = x W1^T + b1, a = GELU(h) (fused epilogue)
  l2_.forward(s, y, a_);
}

void Projector::backward(Stream& s, const Tensor& dx, const Tensor& dy, const Tensor& x) {
  const int64_t N = last_N_;
  VLM_ASSERT(N > 0 && x.size(0) == N, "projector: backward of ", x.size(0), " rows after a forward of ", N);
  require_shape(dy, Shape{N, d_out_}, "projector output gradient");
  l2_.backward(s, da_, dy, a_);       // da = dy W2, dW2 += dy^T a, db2 += sum dy
  gelu_backward(s, da_, h_, da_);     // dh = da * GELU'(h), in place
  round_act(s, da_, l1_.bf16());
  if (dx.defined()) {
    require_shape(dx, Shape{N, d_in_}, "projector input gradient");
    l1_.backward(s, dx, da_, x);
    return;
  }
  if (!l1_.dw.defined()) return;  // frozen (nn/param_table.h)
  GemmOpts g;  // the weight gradients only
  g.trans_a = true;
  g.beta = 1.f;
  matmul(s, l1_.dw, da_, x, g);
  bias_backward(s, l1_.db, da_);
}

}  // namespace vlm

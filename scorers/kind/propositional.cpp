// The propositional scorer (scorers/kind/propositional.h): matmuls with bias epilogues
// (nn/linear.h, or its column/row-parallel forms over the pair) and GELU.
#include "scorers/kind/propositional.h"

#include "nn/context.h"
#include "scorers/kind/gemm.h"

namespace vlm {

std::vector<ParamSpec> Propositional::param_specs() const {
  const int64_t h = dims_.hidden;
  const float sd = 0.02f;
  return {spec("w1f", Shape{h, dims_.d}, 0, InitKind::Normal, sd),
          spec("w1t", Shape{h, kTextureChannels}, 0, InitKind::Normal, sd), spec("b1", Shape{h}, 0, InitKind::Zeros),
          spec("w2", Shape{1, h}, 1, InitKind::Normal, sd), spec("b2", Shape{1}, -1, InitKind::Zeros)};
}

void Propositional::bind(const ParamTable& t) {
  params_.clear();
  bind_param(t, "w1f", w1f_, dw1f_);
  bind_param(t, "w1t", w1t_, dw1t_);
  bind_param(t, "b1", b1_, db1_);
  bind_param(t, "w2", w2_, dw2_);
  bind_param(t, "b2", b2_, db2_);
}

double Propositional::forward_macs_per_image() const {
  return double(dims_.cells()) * double(dims_.hidden) * double(dims_.d + kTextureChannels + 1);
}

Tensor Propositional::input(Stream&, const Tensor& F) { return F; }

void Propositional::forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor&) {
  const int64_t B = F.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  const DType dt = F.dtype();
  const DeviceKind dev = F.device();
  require_shape(F, Shape{B, N, d}, "scorer features F");
  require_shape(s, Shape{B, N}, "scorer logits s");
  require_shape(tex, Shape{B, kTextureChannels, N}, "scorer texture");
  tex_ = tex;
  X_ = input(st, F);
  scratch(pre_, dev, Shape{B * N, h}, dt);
  scratch(h_, dev, Shape{B * N, h}, dt);
  const Linear l1{w1f_, dw1f_, b1_, db1_}, l2{w2_, dw2_, b2_, db2_};
  const Tensor X2 = X_.view(Shape{B * N, d});
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    column_parallel_forward(ctx, X2, X2, {ColumnOut(&l1, pre_)});
  } else {
    l1.forward(st, pre_, X2);
  }
  matmul(st, pre_.view(Shape{B, N, h}), tex, w1t_, scorer_gemm(true, true, 1.f));
  gelu_forward(st, h_, pre_);
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    row_parallel_forward(ctx, s.view(Shape{B * N, 1}), scratch(part_, dev, Shape{B * N, 1}, dt), h_, l2);
  } else {
    l2.forward(st, s.view(Shape{B * N, 1}), h_);
  }
}

void Propositional::backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor&) {
  const int64_t B = X_.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  require_shape(ds, Shape{B, N}, "scorer dlogits");
  require_shape(dF, Shape{B, N, d}, "scorer dF");
  const Tensor ds2 = ds.view(Shape{B * N, 1}), X2 = X_.view(Shape{B * N, d});
  const Linear l1{w1f_, dw1f_, b1_, db1_}, l2{w2_, dw2_, b2_, db2_};
  scratch(dh_, X_.device(), Shape{B * N, h}, X_.dtype());
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    row_parallel_backward(ctx, dh_, ds2, ds2, h_, l2);
  } else {
    l2.backward(st, dh_, ds2, h_);
  }
  gelu_backward(st, dh_, pre_, dh_);
  for (int64_t b = 0; b < B && dw1t_.defined(); ++b)
    matmul(st, dw1t_, dh_.slice(b * N, (b + 1) * N), tex_.slice(b, b + 1).view(Shape{kTextureChannels, N}),
           scorer_gemm(true, true, 1.f));
  input_backward(st, dF, l1, X2);
}

const Tensor& Propositional::input_grad(Stream& st, const Linear& l1, const Tensor& X2) {
  const int64_t B = X_.size(0), N = dims_.cells(), d = dims_.d;
  scratch(dx_, X_.device(), Shape{B, N, d}, X_.dtype());
  const Tensor dx2 = dx_.view(Shape{B * N, d});
  if (pair_) {  // the column-parallel input region: all-reduce over the pair of dh W1f
    TpContext ctx{st, *pair_, false};
    column_parallel_backward(ctx, dx2, dx2, X2, {ColumnGrad{&l1, dh_}});
  } else {
    l1.backward(st, dx2, dh_, X2);
  }
  return dx_;
}

void Propositional::input_backward(Stream& st, const Tensor& dF, const Linear& l1, const Tensor& X2) {
  if (pair_) {
    accumulate(st, dF, input_grad(st, l1, X2), 1.f);
    return;
  }
  l1.backward(st, dF.view(X2.shape()), dh_, X2, 1.f);  // X = F: straight into dF (+=)
}

std::unique_ptr<Scorer> make_propositional_scorer(const ScorerDims& dims, Communicator* pair) {
  return std::make_unique<Propositional>(dims, pair);
}

}  // namespace vlm

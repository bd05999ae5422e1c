// The three scorers' forward and backward (scorers/scorer.h), composed of matmuls
// (with bias epilogues), GELU and the separable centre-surround box mean.
#include "scorers/scorer.h"

#include <algorithm>
#include <cmath>

#include "core/ops.h"
#include "nn/context.h"
#include "nn/linear.h"
#include "parallel/regions.h"
#include "scorers/scratch.h"

namespace vlm {

const char* scorer_name(ScorerKind k) {
  switch (k) {
    case ScorerKind::Propositional: return "propositional";
    case ScorerKind::Perspectival: return "perspectival";
    case ScorerKind::Participatory: return "participatory";
  }
  return "?";
}

namespace {

std::string pname(ScorerKind k, const char* w) { return cat("scorers.", scorer_name(k), ".", w); }

GemmOpts opts(bool ta, bool tb, float beta = 0.f, const Tensor* bias = nullptr, float alpha = 1.f) {
  GemmOpts o;
  o.trans_a = ta, o.trans_b = tb, o.beta = beta, o.bias = bias, o.alpha = alpha;
  return o;
}

// The clipped 1-D box mean along one grid axis: M[i, j] = 1/|W(i)| for |i - j| <= k/2
// inside the grid (the 2-D clipped k x k mean is M_y (x) M_x, separable).
Tensor box_matrix(int G, int k, DType dt, DeviceKind dev) {
  const int h = k / 2;
  std::vector<double> m(size_t(G) * size_t(G), 0.0);
  for (int i = 0; i < G; ++i) {
    const int j0 = std::max(0, i - h), j1 = std::min(G - 1, i + h);
    for (int j = j0; j <= j1; ++j) m[size_t(i * G + j)] = 1.0 / double(j1 - j0 + 1);
  }
  Tensor host = dt == DType::F64 ? Tensor::from_vector(m, Shape{G, G})
                                 : Tensor::from_vector(std::vector<float>(m.begin(), m.end()), Shape{G, G});
  return to_backend(backend_for(dev), host);
}

}  // namespace

std::vector<ParamSpec> scorer_param_specs(ScorerKind kind, const ScorerDims& d, bool split) {
  const float sd = 0.02f;
  const int col = split ? 0 : -1, row = split ? 1 : -1;
  if (kind == ScorerKind::Participatory)
    return {param_spec(pname(kind, "wf"), Shape{d.hidden, d.d}, col, InitKind::Normal, sd),
            param_spec(pname(kind, "wq"), Shape{d.hidden, d.dq}, col, InitKind::Normal, sd)};
  return {param_spec(pname(kind, "w1f"), Shape{d.hidden, d.d}, col, InitKind::Normal, sd),
          param_spec(pname(kind, "w1t"), Shape{d.hidden, kTextureChannels}, col, InitKind::Normal, sd),
          param_spec(pname(kind, "b1"), Shape{d.hidden}, col, InitKind::Zeros),
          param_spec(pname(kind, "w2"), Shape{1, d.hidden}, row, InitKind::Normal, sd),
          param_spec(pname(kind, "b2"), Shape{1}, -1, InitKind::Zeros)};
}

void Scorer::bind(const ParamTable& t) {
  params_.clear();
  auto get = [&](const char* w, Tensor& v, Tensor& g) {
    const Param& p = t.get(pname(kind_, w));
    params_.push_back(&p);
    v = p.value, g = p.grad;
  };
  if (kind_ == ScorerKind::Participatory) {
    get("wf", wf_, dwf_);
    get("wq", wq_, dwq_);
    return;
  }
  get("w1f", w1f_, dw1f_);
  get("w1t", w1t_, dw1t_);
  get("b1", b1_, db1_);
  get("w2", w2_, dw2_);
  get("b2", b2_, db2_);
  if (kind_ == ScorerKind::Perspectival) box_ = box_matrix(dims_.G, dims_.k, t.dtype(), w1f_.device());
}

void Scorer::forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor& q) {
  const int64_t B = F.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  const DType dt = F.dtype();
  const DeviceKind dev = F.device();
  require_shape(F, Shape{B, N, d}, "scorer features F");
  require_shape(s, Shape{B, N}, "scorer logits s");
  F_ = F, tex_ = tex, q_ = q;
  if (kind_ == ScorerKind::Participatory) {
    require_shape(q, Shape{B, dims_.dq}, "participatory query q");
    scratch(fp_, dev, Shape{B * N, h}, dt);
    scratch(qp_, dev, Shape{B, h}, dt);
    matmul(st, fp_, F.view(Shape{B * N, d}), wf_, opts(false, true));
    matmul(st, qp_, q, wq_, opts(false, true));
    matmul(st, s.view(Shape{B, N, 1}), fp_.view(Shape{B, N, h}), qp_.view(Shape{B, h, 1}),
           opts(false, false, 0.f, nullptr, float(1.0 / std::sqrt(double(dims_.hidden)))));
    if (pair_) reduce_from_region_forward(st, *pair_, s, s);  // partial sums over the hidden halves
    return;
  }
  require_shape(tex, Shape{B, kTextureChannels, N}, "scorer texture");
  Tensor X = F;
  if (kind_ == ScorerKind::Perspectival) {
    // X = F - (M_y (x) M_x) F: the box mean along x (rows of one grid row), then along y
    const int64_t G = dims_.G;
    X = scratch(x_, dev, Shape{B, N, d}, dt);
    scratch(tmp_, dev, Shape{B, N, d}, dt);
    matmul(st, tmp_.view(Shape{B * G, G, d}), box_, F.view(Shape{B * G, G, d}), opts(false, false));
    matmul(st, X.view(Shape{B, G, G * d}), box_, tmp_.view(Shape{B, G, G * d}), opts(false, false));
    scale(st, X, -1.f);
    accumulate(st, X, F, 1.f);
  }
  scratch(pre_, dev, Shape{B * N, h}, dt);
  scratch(h_, dev, Shape{B * N, h}, dt);
  const Linear l1{w1f_, dw1f_, b1_, db1_}, l2{w2_, dw2_, b2_, db2_};
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    const Tensor X2 = X.view(Shape{B * N, d});
    column_parallel_forward(ctx, X2, X2, {ColumnOut(&l1, pre_)});
  } else {
    l1.forward(st, pre_, X.view(Shape{B * N, d}));
  }
  matmul(st, pre_.view(Shape{B, N, h}), tex, w1t_, opts(true, true, 1.f));
  gelu_forward(st, h_, pre_);
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    row_parallel_forward(ctx, s.view(Shape{B * N, 1}), scratch(part_, dev, Shape{B * N, 1}, dt), h_, l2);
  } else {
    l2.forward(st, s.view(Shape{B * N, 1}), h_);
  }
}

void Scorer::backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq) {
  const int64_t B = F_.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  const DType dt = F_.dtype();
  const DeviceKind dev = F_.device();
  require_shape(ds, Shape{B, N}, "scorer dlogits");
  require_shape(dF, Shape{B, N, d}, "scorer dF");
  const Tensor F2 = F_.view(Shape{B * N, d}), dF2 = dF.view(Shape{B * N, d});
  if (kind_ == ScorerKind::Participatory) {
    const float alpha = float(1.0 / std::sqrt(double(dims_.hidden)));
    scratch(dh_, dev, Shape{B * N, h}, dt);
    scratch(dx_, dev, Shape{B, h}, dt);
    matmul(st, dh_.view(Shape{B, N, h}), ds.view(Shape{B, N, 1}), qp_.view(Shape{B, 1, h}),
           opts(false, false, 0.f, nullptr, alpha));
    matmul(st, dx_.view(Shape{B, h, 1}), fp_.view(Shape{B, N, h}), ds.view(Shape{B, N, 1}),
           opts(true, false, 0.f, nullptr, alpha));
    if (dwf_.defined()) {  // undefined: frozen (nn/param_table.h)
      matmul(st, dwf_, dh_, F2, opts(true, false, 1.f));
      matmul(st, dwq_, dx_, q_, opts(true, false, 1.f));
    }
    if (!pair_) {
      matmul(st, dF2, dh_, wf_, opts(false, false, 1.f));
      matmul(st, dq, dx_, wq_, opts(false, false, 1.f));
      return;
    }
    // the input regions of the two column-parallel projections: sum the halves' parts
    scratch(part_, dev, Shape{B * N, d}, dt);
    scratch(dqp_, dev, Shape{B, dims_.dq}, dt);
    matmul(st, part_, dh_, wf_, opts(false, false));
    matmul(st, dqp_, dx_, wq_, opts(false, false));
    copy_to_region_backward(st, *pair_, part_, part_);
    copy_to_region_backward(st, *pair_, dqp_, dqp_);
    accumulate(st, dF2, part_, 1.f);
    accumulate(st, dq, dqp_, 1.f);
    return;
  }
  const Tensor ds2 = ds.view(Shape{B * N, 1});
  const Tensor X2 = kind_ == ScorerKind::Perspectival ? x_.view(Shape{B * N, d}) : F2;
  const Linear l1{w1f_, dw1f_, b1_, db1_}, l2{w2_, dw2_, b2_, db2_};
  scratch(dh_, dev, Shape{B * N, h}, dt);
  if (pair_) {
    TpContext ctx{st, *pair_, false};
    row_parallel_backward(ctx, dh_, ds2, ds2, h_, l2);
  } else {
    l2.backward(st, dh_, ds2, h_);
  }
  gelu_backward(st, dh_, pre_, dh_);
  for (int64_t b = 0; b < B && dw1t_.defined(); ++b)
    matmul(st, dw1t_, dh_.slice(b * N, (b + 1) * N), tex_.slice(b, b + 1).view(Shape{kTextureChannels, N}),
           opts(true, true, 1.f));
  if (pair_) {  // dX = all-reduce over the pair of dh W1f (the column-parallel input region)
    TpContext ctx{st, *pair_, false};
    scratch(dx_, dev, Shape{B, N, d}, dt);
    const Tensor dx2 = dx_.view(Shape{B * N, d});
    column_parallel_backward(ctx, dx2, dx2, X2, {ColumnGrad{&l1, dh_}});
    if (kind_ == ScorerKind::Propositional) {
      accumulate(st, dF, dx_, 1.f);
      return;
    }
  } else if (kind_ == ScorerKind::Propositional) {
    l1.backward(st, dF2, dh_, X2, 1.f);
    return;
  } else {
    scratch(dx_, dev, Shape{B, N, d}, dt);
    l1.backward(st, dx_.view(Shape{B * N, d}), dh_, X2);
  }
  // perspectival: dF += dX - (M_y^T (x) M_x^T) dX
  const int64_t G = dims_.G;
  accumulate(st, dF, dx_, 1.f);
  matmul(st, tmp_.view(Shape{B, G, G * d}), box_, dx_.view(Shape{B, G, G * d}), opts(true, false));
  matmul(st, dx_.view(Shape{B * G, G, d}), box_, tmp_.view(Shape{B * G, G, d}), opts(true, false));
  accumulate(st, dF, dx_, -1.f);
}

}  // namespace vlm

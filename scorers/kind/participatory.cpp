// The participatory scorer (what matters for the prompt, scorers/scorer.h):
//   s = (W_f F) . (W_q q) / sqrt(hidden), per cell
// with q [B, dq] the query. Parameters "scorers.participatory.<w>": wf [h,d], wq [h,dq];
// split over a pair by rows (column-parallel projections), the partial dot products
// summed over the pair (the hidden halves).
#include <cmath>

#include "parallel/regions.h"
#include "scorers/kind/gemm.h"
#include "scorers/scorer.h"

namespace vlm {

namespace {

class Participatory final : public Scorer {
 public:
  Participatory(const ScorerDims& dims, Communicator* pair) : Scorer(ScorerKind::Participatory, dims, pair) {}

  std::vector<ParamSpec> param_specs() const override {
    const float sd = 0.02f;
    return {spec("wf", Shape{dims_.hidden, dims_.d}, 0, InitKind::Normal, sd),
            spec("wq", Shape{dims_.hidden, dims_.dq}, 0, InitKind::Normal, sd)};
  }
  void bind(const ParamTable& t) override {
    params_.clear();
    bind_param(t, "wf", wf_, dwf_);
    bind_param(t, "wq", wq_, dwq_);
  }
  // wf per cell, wq per image
  double forward_macs_per_image() const override {
    return double(dims_.cells()) * double(dims_.hidden) * double(dims_.d) + double(dims_.hidden) * double(dims_.dq);
  }
  void forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor& q) override;
  void backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq) override;

 private:
  float alpha() const { return float(1.0 / std::sqrt(double(dims_.hidden))); }

  Tensor wf_, wq_, dwf_, dwq_;
  Tensor F_, q_;                                      // saved inputs
  ScratchTensor fp_, qp_, dh_, dx_, part_, dqp_;      // projections and scratch
};

void Participatory::forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor&, const Tensor& q) {
  const int64_t B = F.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  const DType dt = F.dtype();
  const DeviceKind dev = F.device();
  require_shape(F, Shape{B, N, d}, "scorer features F");
  require_shape(s, Shape{B, N}, "scorer logits s");
  require_shape(q, Shape{B, dims_.dq}, "participatory query q");
  F_ = F, q_ = q;
  scratch(fp_, dev, Shape{B * N, h}, dt);
  scratch(qp_, dev, Shape{B, h}, dt);
  matmul(st, fp_, F.view(Shape{B * N, d}), wf_, scorer_gemm(false, true));
  matmul(st, qp_, q, wq_, scorer_gemm(false, true));
  matmul(st, s.view(Shape{B, N, 1}), fp_.view(Shape{B, N, h}), qp_.view(Shape{B, h, 1}),
         scorer_gemm(false, false, 0.f, alpha()));
  if (pair_) reduce_from_region_forward(st, *pair_, s, s);  // partial sums over the hidden halves
}

void Participatory::backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq) {
  const int64_t B = F_.size(0), N = dims_.cells(), d = dims_.d, h = local_hidden();
  const DType dt = F_.dtype();
  const DeviceKind dev = F_.device();
  require_shape(ds, Shape{B, N}, "scorer dlogits");
  require_shape(dF, Shape{B, N, d}, "scorer dF");
  const Tensor F2 = F_.view(Shape{B * N, d}), dF2 = dF.view(Shape{B * N, d});
  scratch(dh_, dev, Shape{B * N, h}, dt);
  scratch(dx_, dev, Shape{B, h}, dt);
  matmul(st, dh_.view(Shape{B, N, h}), ds.view(Shape{B, N, 1}), qp_.view(Shape{B, 1, h}),
         scorer_gemm(false, false, 0.f, alpha()));
  matmul(st, dx_.view(Shape{B, h, 1}), fp_.view(Shape{B, N, h}), ds.view(Shape{B, N, 1}),
         scorer_gemm(true, false, 0.f, alpha()));
  if (dwf_.defined()) {  // undefined: frozen (nn/param_table.h)
    matmul(st, dwf_, dh_, F2, scorer_gemm(true, false, 1.f));
    matmul(st, dwq_, dx_, q_, scorer_gemm(true, false, 1.f));
  }
  if (!pair_) {
    matmul(st, dF2, dh_, wf_, scorer_gemm(false, false, 1.f));
    matmul(st, dq, dx_, wq_, scorer_gemm(false, false, 1.f));
    return;
  }
  // the input regions of the two column-parallel projections: sum the halves' parts
  scratch(part_, dev, Shape{B * N, d}, dt);
  scratch(dqp_, dev, Shape{B, dims_.dq}, dt);
  matmul(st, part_, dh_, wf_, scorer_gemm(false, false));
  matmul(st, dqp_, dx_, wq_, scorer_gemm(false, false));
  copy_to_region_backward(st, *pair_, part_, part_);
  copy_to_region_backward(st, *pair_, dqp_, dqp_);
  accumulate(st, dF2, part_, 1.f);
  accumulate(st, dq, dqp_, 1.f);
}

}  // namespace

std::unique_ptr<Scorer> make_participatory_scorer(const ScorerDims& dims, Communicator* pair) {
  return std::make_unique<Participatory>(dims, pair);
}

}  // namespace vlm

// The propositional scorer (what is there), a per-cell MLP of the features and the
// texture (scorers/scorer.h):
//   s = w2 . GELU(W1f X + W1t tex + b1) + b2, per cell, with X = F
// Parameters "scorers.propositional.<w>": w1f [h,d], w1t [h,13], b1 [h], w2 [1,h], b2 [1].
// Split over a pair: w1f/w1t/b1 by rows (column-parallel), w2 by columns (row-parallel,
// b2 added once after the reduction).
// The perspectival scorer (scorers/kind/perspectival.cpp) is this MLP on another X: it
// overrides input() and input_backward().
#pragma once
#include "nn/linear.h"
#include "scorers/scorer.h"

namespace vlm {

class Propositional : public Scorer {
 public:
  Propositional(const ScorerDims& dims, Communicator* pair, ScorerKind kind = ScorerKind::Propositional)
      : Scorer(kind, dims, pair) {}
  std::vector<ParamSpec> param_specs() const override;
  void bind(const ParamTable& t) override;
  void forward(Stream& st, const Tensor& s, const Tensor& F, const Tensor& tex, const Tensor& q) override;
  void backward(Stream& st, const Tensor& ds, const Tensor& dF, const Tensor& dq) override;
  double forward_macs_per_image() const override;  // N h (d + 13 + 1): w1f, w1t, w2

 protected:
  // The MLP's input X [B,G*G,d] from F (kept until backward): F itself.
  virtual Tensor input(Stream& st, const Tensor& F);
  // dF += the gradient of the loss through X, given the first layer's l1 (its output
  // gradient in dh_) and X viewed [B*G*G, d]: here dX itself.
  virtual void input_backward(Stream& st, const Tensor& dF, const Linear& l1, const Tensor& X2);
  // dX [B,G*G,d] (overwrite, in dx_) = dh_ W1f, with l1's weight gradients (+=); summed
  // over the pair when split.
  const Tensor& input_grad(Stream& st, const Linear& l1, const Tensor& X2);

  Tensor w1f_, w1t_, b1_, w2_, b2_;       // values
  Tensor dw1f_, dw1t_, db1_, dw2_, db2_;  // gradients
  Tensor X_, tex_;                        // saved inputs
  ScratchTensor pre_, h_, dh_, dx_, part_;
};

}  // namespace vlm

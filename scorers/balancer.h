// The balancer: mixes the three logit maps of an image into its relevance map.
//   stats [B, 9]  = (mean, max, std) of each logit map s_k (row_stats, std with eps 1e-6)
//   w     [B, 3]  = softmax(V2 GELU(V1s stats + V1q q + c1) + c2)
//   r     [B,G*G] = sigmoid(sum_k w_k s_k)               in (0, 1)
// Input S [B, 3, G*G] (the maps of the scorers in the order of ScorerKind), q [B, dq]
// the query the participatory scorer used. Parameters (replicated), names
// "scorers.balancer.<w>": v1s [h,9], v1q [h,dq], c1 [h], v2 [3,h], c2 [3].
// Gradients (nn/context.h): parameters accumulate; dS OVERWRITES; dq ACCUMULATES (the
// participatory scorer adds into the same buffer).
// forward keeps views of S and q for backward.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "nn/param_table.h"
#include "scorers/scorer.h"

namespace vlm {

inline constexpr float kStatsEps = 1e-6f;

std::vector<ParamSpec> balancer_param_specs(const ScorerDims& dims);

class Balancer {
 public:
  explicit Balancer(const ScorerDims& dims) : dims_(dims) {}
  void bind(const ParamTable& t);

  // r [B,G*G] (overwrite); w [B,3] the mixing weights are kept (weights()).
  void forward(Stream& st, const Tensor& r, const Tensor& S, const Tensor& q);
  // dr [B,G*G] -> dS [B,3,G*G] (=), dq [B,dq] (+=), parameter gradients (+=).
  void backward(Stream& st, const Tensor& dS, const Tensor& dq, const Tensor& dr);
  const Tensor& weights() const { return w_; }
  // Multiply-adds per image of the forward's products with weights: v1s, v1q, v2.
  double forward_macs_per_image() const {
    return double(dims_.hidden) * double(3 * kNumScorers + dims_.dq + kNumScorers);
  }

 private:
  ScorerDims dims_;
  Tensor v1s_, v1q_, c1_, v2_, c2_, dv1s_, dv1q_, dc1_, dv2_, dc2_;
  Tensor S_, q_;                                        // saved inputs
  ScratchTensor stats_, pre_, h_, a_, w_, z_;                 // activations
  Tensor r_;                                            // the output (forward's r)
  ScratchTensor dz_, dw_, dh_, dstats_, dtmp_;                // scratch
};

}  // namespace vlm

// The visual tokens of the level of detail: for each image, the tokens its allocation
// (scorers/lod_allocator.h) emits, packed image after image (offsets cu[B+1]):
//   token t = mean of F over its square of cells            (per-level pooling)
//           + level[l] + pos_y[cy] + pos_x[cx]               (level and 2-D position)
//   times the straight-through gate g = 1 + r_reg - stopgrad(r_reg),
// with (cy, cx) = the token's centre in half-cell units minus 1, (2 y0 + side - 1,
// 2 x0 + side - 1) in [0, 2G-2], and r_reg the mean relevance over the token's region.
// The gate's forward value is exactly 1 (the token is not changed); what it scales, and
// so what the relevance gradient measures, is lod.gate's choice:
//  - token (default): the whole token; its backward adds
//      dr[cell] += sum over the region's tokens of <dtoken, token> / R^2
//    for the region's cells (how much the loss wants the region's tokens larger);
//  - detail: the token's detail over its coarser level, token = coarse + g (fine - coarse)
//    (fine: the pooled square; coarse: the pooled parent square, side 2 x side, of the
//    level above; level-0 tokens have no coarser level and no gate), with the gate on the
//    region's relevance relative to the image's mean, g = 1 + (r_reg - mean r) -
//    stopgrad(r_reg - mean r); its backward adds, with rd_t = <dtoken_t, fine_t - coarse_t>,
//      dr[cell] += sum over the image's tokens t of rd_t ([cell in t's region] / R^2 - 1/G^2),
//    the first-order change of the loss from giving the region its detail, against the
//    image's other regions: a signal that normalisation of the token (RMSNorm scales it
//    away) does not cancel, and that does not push every region's relevance up together
//    (an allocation at a fixed budget depends only on the order of the regions; a
//    uniform rise would only saturate the sigmoid and stop the gradient).
//  - soft: the detail gate, except for the tokens of a soft allocation (ImageLod::mix,
//    lod_allocator.h soft_mix: every region at its finest level), which are not gated but
//    mixed, each token of region j at level >= 1
//      token = level0_j + mix_j (fine - level0_j),   level0_j the region's mean,
//    with mix_j hard (1 on the k most relevant regions, 0 elsewhere) and its gradient the
//    soft surrogate's, k share_j = k softmax_j(rho / tau) (straight through), with
//    rd_t = <dtoken_t, fine_t - level0_j> the first-order value of region j's detail, also
//    where mix_j = 0:
//      dr[c] += sum_t rd_t k / (tau R^2) share_j ([c in j] - share_{region(c)}),
//    so the regions compete for the detail the budget buys.
// So the language-model loss reaches the relevance r (and through it the balancer and
// the scorers). The allocation itself carries no gradient.
// Pooling and the gate are matmuls by per-image matrices built on the host from the
// allocation: P [T_i, G*G] (1/side^2 on the token's square), Q [T_i, G*G] (1/R^2 on
// its region; minus 1/G^2 everywhere for the detail gate) and, for the detail gate, D [T_i, G*G] = P - (1/(2 side)^2 on the parent
// square) (zero rows at level 0), copied to the device in the stream's order (copy_from_host) into buffers
// reserved for the largest token count (reserve), with the level and position ids. Parameters (replicated), "scorers.lod.level" [levels, d],
// "scorers.lod.pos_y" and "scorers.lod.pos_x" [2G-1, d].
// Gradients (nn/context.h): parameters +=, dF +=, dr += (the relevance gradient has no
// other source).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "nn/param_table.h"
#include "scorers/lod_allocator.h"
#include "scorers/scorer.h"

namespace vlm {

std::vector<ParamSpec> lod_param_specs(const ScorerDims& dims, int levels);

class LodTokens {
 public:
  // gate_full_detail=false: the tokens of an image at full detail (every region at the
  // finest level, not a soft allocation) are not gated (Q's rows zero: no dr), lod.gate_full_detail.
  LodTokens(const ScorerDims& dims, int region, LodGate gate = LodGate::Token, bool gate_full_detail = true)
      : dims_(dims), R_(region), gate_(gate), gate_full_detail_(gate_full_detail) {}
  void bind(const ParamTable& t);
  // Plans every buffer for batches of at most max_tokens tokens (on the device of the
  // bound parameters), so that forward and backward allocate nothing.
  void reserve(int64_t max_tokens);

  // Total tokens of a batch's allocations.
  static int64_t total_tokens(const std::vector<ImageLod>& lods);
  // tokens [sum T_i, d] (overwrite) from F [B,G*G,d]; cu (resized to B+1) the offsets.
  void forward(Stream& st, const Tensor& tokens, std::vector<int64_t>& cu, const std::vector<ImageLod>& lods,
               const Tensor& F);
  // dtokens [sum T_i, d] -> dF [B,G*G,d] (+=), dr [B,G*G] (+=), parameter gradients (+=).
  void backward(Stream& st, const Tensor& dF, const Tensor& dr, const Tensor& dtokens);

 private:
  // The rows of P, Q and D (and the ids) of a soft allocation's tokens, from row t.
  void soft_rows(const ImageLod& lod, const Tensor& P, const Tensor& Q, const Tensor& D, int64_t t);
  ScorerDims dims_;
  int R_;
  LodGate gate_;
  bool gate_full_detail_;
  Tensor level_, pos_y_, pos_x_, dlevel_, dpos_y_, dpos_x_;
  Tensor ones_;                       // [d, 1]
  ScratchTensor pool_, region_mean_, detail_;  // P, Q, D of the batch, [T, G*G] (D: detail gate)
  ScratchTensor ids_level_, ids_y_, ids_x_;  // [T] i32
  ScratchTensor saved_, tmp_, rowdot_;       // [T,d] what the gate scales, [T,d], [T,1]
  ScratchTensor host_pool_, host_mean_, host_detail_;  // host staging of P, Q, D (the tokens' dtype)
  std::vector<int32_t> il_, iy_, ix_;  // host staging of the ids
  std::vector<int64_t> cu_;
};

}  // namespace vlm

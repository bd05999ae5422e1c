// Vocab-parallel output layer and cross-entropy (Megatron): the full logits [T, Vp] are
// never gathered. Rank r holds logit columns [offset, offset+Vl) = its lm_head rows.
//   logits[T,Vl] = column-parallel(x) (lm_head [Vl,C], no bias; tied: embed_tokens)
//   columns >= V (vocabulary padding) are set to -1e30: they take no probability and
//   get zero gradient, so the model does not depend on the padding (= tp).
//   rowmax[T]  = all-reduce MAX of the shard maxima
//   sumexp[T], target_logit[T] = all-reduce SUM (one call: they are adjacent, [2,T])
//   losses[T]  = log(sumexp) + rowmax - target_logit; 0 where target == kIgnoreIndex
// The mean loss divides the sum over counted tokens by their number (the loss mask is
// the targets: kIgnoreIndex = not counted). Every rank ends with the same losses.
// Backward: dlogits = (softmax_shard - onehot_shard) * dlosses (no communication), then
// the column-parallel backward (all-reduce, SP: reduce-scatter, of dx).
#pragma once
#include "nn/context.h"
#include "nn/linear.h"

namespace vlm {

inline constexpr int kIgnoreIndex = -100;  // HF / PyTorch convention

struct VocabParallelOutput {
  Linear head;               // w [Vl, C] (no bias)
  int64_t vocab_offset = 0;  // first vocabulary id of this rank's columns
  int64_t valid_local = 0;   // columns [0, valid_local) are real tokens, the rest padding

  // x [Ts,C] -> x_full [T,C] (may alias x without SP) -> logits [T,Vl] (padding masked;
  // pad_fill [T, Vl - valid_local] holds -1e30 (filled once when the activations are
  // planned), undefined when there is no padding).
  void forward(TpContext& ctx, const Tensor& logits, const Tensor& x_full, const Tensor& x,
               const Tensor& pad_fill) const;
  // dlogits [T,Vl] -> dx [Ts,C] (overwrite; dfull [T,C] scratch, may alias dx without SP).
  void backward(TpContext& ctx, const Tensor& dx, const Tensor& dfull, const Tensor& x_full,
                const Tensor& dlogits) const;
};

struct VocabParallelCrossEntropy {
  // stats [2T]: sumexp then target_logit.
  static void forward(TpContext& ctx, const Tensor& losses, const Tensor& rowmax, const Tensor& stats,
                      const Tensor& logits, const Tensor& targets, int64_t vocab_offset);
  static void backward(TpContext& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& rowmax,
                       const Tensor& stats, const Tensor& targets, const Tensor& dlosses, int64_t vocab_offset);
};

}  // namespace vlm

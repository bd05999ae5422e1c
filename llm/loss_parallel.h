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
//
// The loss with the output head's chunking (docs/language-backbone.md, "Output head
// and loss"): the backbone runs the head and the loss over chunks of rows; in a
// training forward each chunk's loss gradient replaces its logits in place and the
// head's backward of the chunk runs at once (dx rows, dW +=), so only one chunk of
// logits [rows, Vl] ever exists and no GEMM is repeated. loss_chunk_rows picks the rows.
// Statistics (rowmax, sumexp, target_logit, losses) are f32; the logits are the
// activations' dtype (bf16 under train.precision=bf16).
#pragma once
#include <cstddef>

#include "nn/context.h"
#include "nn/linear.h"

namespace vlm {

inline constexpr int kIgnoreIndex = -100;  // HF / PyTorch convention

// The auto chunk's budget: the most bytes of logits one chunk may take.
inline constexpr size_t kLossChunkBytes = size_t(256) << 20;

// Rows per chunk of the output head and loss for micro-batches of at most max_tokens
// rows of Vl logits of `elem` bytes: `chunk` (> 0, model.loss_chunk) capped at
// max_tokens; 0 = auto: max_tokens when their logits take at most kLossChunkBytes, else
// the most rows whose logits do, rounded down to a multiple of 128 (at least 128).
int64_t loss_chunk_rows(int64_t chunk, int64_t max_tokens, int64_t Vl, size_t elem);

struct VocabParallelOutput {
  Linear head;               // w [Vl, C] (no bias)
  int64_t vocab_offset = 0;  // first vocabulary id of this rank's columns
  int64_t valid_local = 0;   // columns [0, valid_local) are real tokens, the rest padding

  // logits [n,Vl] of n rows x_full [n,C] already in the TP region (padding masked;
  // pad_fill [n, Vl - valid_local] holds -1e30 (filled once when the activations are
  // planned), undefined when there is no padding).
  void forward(Stream& s, const Tensor& logits, const Tensor& x_full, const Tensor& pad_fill) const;
  // The backward of those rows: dx_full [n,C] = dlogits W (overwrite), dW += dlogits^T x_full.
  void backward(Stream& s, const Tensor& dx_full, const Tensor& x_full, const Tensor& dlogits) const;
};

struct VocabParallelCrossEntropy {
  // stats [2T]: sumexp then target_logit.
  static void forward(TpContext& ctx, const Tensor& losses, const Tensor& rowmax, const Tensor& stats,
                      const Tensor& logits, const Tensor& targets, int64_t vocab_offset);
  // dlogits may be logits (the gradient in place).
  static void backward(TpContext& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& rowmax,
                       const Tensor& stats, const Tensor& targets, const Tensor& dlosses, int64_t vocab_offset);
};

}  // namespace vlm

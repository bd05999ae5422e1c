// Vocab-parallel output layer and cross-entropy; see loss_parallel.h.
#include "llm/loss_parallel.h"

#include <algorithm>

#include "core/ops.h"

namespace vlm {

int64_t loss_chunk_rows(int64_t chunk, int64_t max_tokens, int64_t Vl, size_t elem) {
  if (chunk > 0) return std::min(chunk, max_tokens);
  const size_t row = size_t(Vl) * elem;
  if (size_t(max_tokens) * row <= kLossChunkBytes) return max_tokens;
  const int64_t rows = int64_t(kLossChunkBytes / row) / 128 * 128;
  return std::min(max_tokens, std::max<int64_t>(rows, 128));
}

void VocabParallelOutput::forward(Stream& s, const Tensor& logits, const Tensor& x_full,
                                  const Tensor& pad_fill) const {
  head.forward(s, logits, x_full);
  if (pad_fill.defined()) unslice_cols(s, logits, pad_fill, valid_local);
}

void VocabParallelOutput::backward(Stream& s, const Tensor& dx_full, const Tensor& x_full,
                                   const Tensor& dlogits) const {
  head.backward(s, dx_full, dlogits, x_full);
}

void VocabParallelCrossEntropy::forward(TpContext& ctx, const Tensor& losses, const Tensor& rowmax,
                                        const Tensor& stats, const Tensor& logits, const Tensor& targets,
                                        int64_t vocab_offset) {
  Stream& s = ctx.stream;
  const int64_t T = logits.size(0);
  const Tensor sumexp = stats.sub(0, Shape{T}), target_logit = stats.sub(T, Shape{T});
  vocab_ce_rowmax(s, rowmax, logits);
  if (ctx.tp_size() > 1) ctx.tp.all_reduce(s, rowmax, ReduceOp::Max);
  vocab_ce_sumexp(s, sumexp, target_logit, logits, rowmax, targets, vocab_offset);
  if (ctx.tp_size() > 1) ctx.tp.all_reduce(s, stats, ReduceOp::Sum);
  vocab_ce_loss(s, losses, rowmax, sumexp, target_logit, targets, kIgnoreIndex);
}

void VocabParallelCrossEntropy::backward(TpContext& ctx, const Tensor& dlogits, const Tensor& logits,
                                         const Tensor& rowmax, const Tensor& stats, const Tensor& targets,
                                         const Tensor& dlosses, int64_t vocab_offset) {
  const int64_t T = logits.size(0);
  vocab_ce_backward(ctx.stream, dlogits, logits, rowmax, stats.sub(0, Shape{T}), targets, dlosses, vocab_offset,
                    kIgnoreIndex);
}

}  // namespace vlm

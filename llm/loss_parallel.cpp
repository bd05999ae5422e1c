// Vocab-parallel output layer and cross-entropy; see loss_parallel.h.
#include "llm/loss_parallel.h"

#include "core/ops.h"

namespace vlm {

void VocabParallelOutput::forward(TpContext& ctx, const Tensor& logits, const Tensor& x_full, const Tensor& x,
                                  const Tensor& pad_fill) const {
  column_parallel_forward(ctx, x_full, x, {{&head, logits}});
  if (pad_fill.defined()) unslice_cols(ctx.stream, logits, pad_fill, valid_local);
}

void VocabParallelOutput::backward(TpContext& ctx, const Tensor& dx, const Tensor& dfull, const Tensor& x_full,
                                   const Tensor& dlogits) const {
  column_parallel_backward(ctx, dx, dfull, x_full, {{&head, dlogits}});
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

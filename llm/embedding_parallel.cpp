// VocabParallelEmbedding; see embedding_parallel.h.
#include "llm/embedding_parallel.h"

#include "core/ops.h"
#include "parallel/regions.h"

namespace vlm {

void VocabParallelEmbedding::forward(TpContext& ctx, const Tensor& out, const Tensor& partial, const Tensor& ids,
                                     const Tensor& rows, const Tensor& values) const {
  Stream& s = ctx.stream;
  embedding_forward(s, partial, ids, table, vocab_offset);
  // partial[rows[i]] (zero: caller rows have no id in any shard) += values[i], on rank 0.
  if (rows.defined() && rows.numel() > 0 && ctx.tp_rank() == 0) embedding_backward(s, partial, values, rows, 0);
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_forward(s, ctx.tp, out, partial);
  else
    reduce_from_region_forward(s, ctx.tp, out, partial);
}

void VocabParallelEmbedding::backward(TpContext& ctx, const Tensor& dout, const Tensor& dfull, const Tensor& ids,
                                      const Tensor& rows, const Tensor& d_values) const {
  Stream& s = ctx.stream;
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_backward(s, ctx.tp, dfull, dout);
  else
    reduce_from_region_backward(s, ctx.tp, dfull, dout);
  if (dtable.defined()) embedding_backward(s, dtable, dfull, ids, vocab_offset);  // undefined: frozen
  // d_values[i] = dfull[rows[i]]: a row gather, written as a lookup in the table dfull.
  if (rows.defined() && d_values.defined() && rows.numel() > 0) embedding_forward(s, d_values, rows, dfull, 0);
}

}  // namespace vlm

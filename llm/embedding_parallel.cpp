// VocabParallelEmbedding; see embedding_parallel.h.
#include "llm/embedding_parallel.h"

#include "core/ops.h"
#include "parallel/regions.h"

namespace vlm {

void VocabParallelEmbedding::forward(TpContext& ctx, const Tensor& out, const Tensor& partial,
                                     const Tensor& ids) const {
  Stream& s = ctx.stream;
  embedding_forward(s, partial, ids, table, vocab_offset);
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_forward(s, ctx.tp, out, partial);
  else
    reduce_from_region_forward(s, ctx.tp, out, partial);
}

void VocabParallelEmbedding::backward(TpContext& ctx, const Tensor& dout, const Tensor& dfull,
                                      const Tensor& ids) const {
  Stream& s = ctx.stream;
  if (ctx.seq_parallel())
    reduce_scatter_to_sequence_region_backward(s, ctx.tp, dfull, dout);
  else
    reduce_from_region_backward(s, ctx.tp, dfull, dout);
  embedding_backward(s, dtable, dfull, ids, vocab_offset);
}

}  // namespace vlm

// VocabParallelEmbedding (Megatron): the table [Vp, C] is split by vocabulary rows;
// rank r holds rows [r*Vl, (r+1)*Vl), Vl = Vp/tp (Vp = vocabulary padded to a multiple
// of 128*tp). Each rank looks up the ids inside its shard (zeros elsewhere), then the
// partial rows are summed over the group:
//   fwd: partial[T,C] -> out = all-reduce (reduce-from-region)  | SP: reduce-scatter -> [Ts,C]
//   bwd: dfull = dout (identity)                                 | SP: all-gather [Ts,C] -> [T,C]
//        dtable[id - offset] += dfull[t] for ids in the shard.
// Caller rows (the mixed input of llm/lm_input.h): rows [Tv] i32 of the output take the
// given values [Tv,C] instead of a lookup. Their ids lie outside every shard (zeros in
// every partial); TP rank 0 alone adds the values into its partial sums before the
// reduction, so every rank ends with exactly the values (v + 0 + ... + 0 = v), and the
// communication is that of the token path. Backward gathers d(values) = the rows of
// dfull (identical on every rank).
// Gradients follow the rule of nn/context.h.
#pragma once
#include "nn/context.h"

namespace vlm {

struct VocabParallelEmbedding {
  Tensor table, dtable;  // [Vl, C]
  int64_t vocab_offset = 0;

  // ids [T] i32 -> out [Ts,C]; partial [T,C] is scratch (may alias out without SP);
  // rows / values: the caller rows (above), or undefined.
  void forward(TpContext& ctx, const Tensor& out, const Tensor& partial, const Tensor& ids,
               const Tensor& rows = Tensor{}, const Tensor& values = Tensor{}) const;
  // dout [Ts,C]; dfull [T,C] scratch (may alias dout without SP); d_values [Tv,C]
  // (overwrite) receives the gradient of the caller rows `rows` when both are defined.
  void backward(TpContext& ctx, const Tensor& dout, const Tensor& dfull, const Tensor& ids,
                const Tensor& rows = Tensor{}, const Tensor& d_values = Tensor{}) const;
};

}  // namespace vlm

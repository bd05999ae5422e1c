// VocabParallelEmbedding (Megatron): the table [Vp, C] is split by vocabulary rows;
// rank r holds rows [r*Vl, (r+1)*Vl), Vl = Vp/tp (Vp = vocabulary padded to a multiple
// of 128*tp). Each rank looks up the ids inside its shard (zeros elsewhere), then the
// partial rows are summed over the group:
//   fwd: partial[T,C] -> out = all-reduce (reduce-from-region)  | SP: reduce-scatter -> [Ts,C]
//   bwd: dfull = dout (identity)                                 | SP: all-gather [Ts,C] -> [T,C]
//        dtable[id - offset] += dfull[t] for ids in the shard.
// Gradients follow the rule of nn/context.h.
#pragma once
#include "nn/context.h"

namespace vlm {

struct VocabParallelEmbedding {
  Tensor table, dtable;  // [Vl, C]
  int64_t vocab_offset = 0;

  // ids [T] i32 -> out [Ts,C]; partial [T,C] is scratch (may alias out without SP).
  void forward(TpContext& ctx, const Tensor& out, const Tensor& partial, const Tensor& ids) const;
  // dout [Ts,C]; dfull [T,C] scratch (may alias dout without SP).
  void backward(TpContext& ctx, const Tensor& dout, const Tensor& dfull, const Tensor& ids) const;
};

}  // namespace vlm

// TpContext: what every nn/ (and llm/) layer's forward/backward runs with: the stream,
// the TP group's communicator (size 1 = no tensor parallelism; the region ops are then
// identities without communication) and whether sequence parallelism is on.
//
// The gradient rule, for every forward/backward built on nn/ (other headers refer here):
//  - Parameter gradients ACCUMULATE (+=): micro-batches and tied weights add up, until
//    the owner zeroes them (ParamTable::zero_grads).
//  - Activation gradients OVERWRITE (=) their output buffers ...
//  - ... except the residual stream gradient dres, which ACCUMULATES (+=): each block's
//    backward adds its branch gradients into the dres it was given (nn/block.h).
// side: when given (tp > 1, the training step's overlap mode), the column-parallel layers
// post their input-gradient reduction on it during their weight gradients (nn/tp_side.h).
// Token dimensions: T = tokens of the packed micro-batch on the TP group (every rank
// sees all T in the tensor-parallel regions); Ts = tokens of the residual stream on this
// rank: T without SP, T/tp with SP (rank r holds rows [r*Ts, (r+1)*Ts)).
#pragma once
#include "core/backend.h"
#include "parallel/communicator.h"

namespace vlm {

class TpSide;

struct TpContext {
  Stream& stream;
  Communicator& tp;
  bool sp = false;         // sequence parallel (only meaningful when tp.size() > 1)
  TpSide* side = nullptr;  // see above

  int tp_size() const { return tp.size(); }
  int tp_rank() const { return tp.rank(); }
  bool seq_parallel() const { return sp && tp.size() > 1; }
};

}  // namespace vlm

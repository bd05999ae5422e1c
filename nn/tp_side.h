// TpSide: a second stream for the tensor-parallel collectives that the next ops do not
// wait for. A column-parallel layer's backward (nn/linear.h) computes its input gradient,
// posts that gradient's reduction over the TP group on the side stream and computes its
// weight gradients meanwhile, then joins (Megatron's overlap of the input-gradient
// all-reduce with the weight-gradient GEMMs). The training step makes one in overlap
// mode at tp > 1 (train/step.h); without it the same ops run on the layer's stream.
//   fork(main, fn): fn(side) runs on the side stream, after main's work so far;
//   join(main):     main's later work waits for fn.
// Between fork and join the caller issues nothing that touches fn's tensors and no other
// collective (every rank posts its TP collectives in one order; the communicator's bf16
// staging, parallel/regions.h, is used by one stream at a time).
// CUDA: two events made once (record/wait; the host never waits). CPU: main's ops have
// already run on the calling thread when fork is called, so fn is launched on the side
// stream's worker, and join waits for the side stream on the host.
// Results are bitwise those without a side stream: the same ops on the same data.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "core/backend.h"

namespace vlm {

class TpSide {
 public:
  TpSide(Backend& b, Stream& side);
  void fork(Stream& main, const std::function<void(Stream&)>& fn);
  void join(Stream& main);
  int64_t forks() const { return forks_; }  // collectives posted so far (tests)

 private:
  Stream& side_;
  std::unique_ptr<Event> ready_, done_;
  int64_t forks_ = 0;
};

}  // namespace vlm

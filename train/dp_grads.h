// DpGrads: the data-parallel reduction of the gradients of the trainable modules, and
// with ZeRO-1 the shard of every module that this DP rank updates.
// A module's gradients are one flat f32 arena of n elements (ParamTable: the value and
// gradient arenas have the same layout, padding zero):
//  - zero = 0: all-reduce (sum) of the whole arena over DP, in buckets of bucket_mb,
//    posted together then waited.
//  - zero = 1: DP rank r owns elements [r*s, (r+1)*s), s = floor(n / dp), and everyone
//    owns the tail [dp*s, n) (fewer than dp elements). The gradients are reduce-scattered
//    into shard_grad (r's block summed over DP), the tail all-reduced in place; after the
//    optimizer has updated the owned values, gather_values all-gathers every rank's
//    block back into the value arena. So optimizer state exists only for s + tail
//    elements per module (train/optimizer.h), 1/dp of the unsharded state.
// Every rank must call reduce (and gather_values) for the same modules in the same order
// on the same stream kind (the step's `comm` tasks, the trainer's default stream).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "train/vlm_model.h"

namespace vlm {

class DpGrads {
 public:
  // Only the modules whose `trainable` flag is set are reduced (and get buffers).
  DpGrads(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, Communicator& dp, int zero,
          double bucket_mb, Backend& backend);

  int zero() const { return zero_; }
  Communicator& dp() const { return dp_; }
  // Reduces module i's gradients (the rule above).
  void reduce(Stream& s, size_t i);
  // zero = 1: all-gathers the owned blocks of module i's values (after the update).
  void gather_values(Stream& s, size_t i);

  // The elements of module i this rank updates: [begin, end) of the flat arena, and their
  // reduced gradients (the shard, then the tail; zero = 0: the whole arena).
  struct Owned {
    int64_t begin = 0, end = 0;        // the block
    int64_t tail_begin = 0, tail_end = 0;  // the tail (empty when zero = 0)
    Tensor grad;                       // [end-begin + tail_end-tail_begin] f32
  };
  const Owned& owned(size_t i) const { return owned_[i]; }
  size_t bytes(size_t i) const;  // bytes this rank sends for module i per step (the byte counters' rule)

 private:
  std::vector<ModuleParams> modules_;
  Communicator& dp_;
  int zero_;
  double bucket_mb_;
  std::vector<Owned> owned_;
  std::vector<Tensor> gather_tmp_;  // zero = 1: [s] the owned values, the all-gather's input
};

// A module's flat f32 view of a ParamTable arena (values or gradients).
Tensor flat_f32(const Arena& a);

}  // namespace vlm

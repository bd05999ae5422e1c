// DpGrads: the data-parallel reduction of the gradients of the trainable modules, and
// with ZeRO-1 the shard of every module that this DP rank updates.
// A module's gradients are one flat f32 arena of n elements (ParamTable: the value and
// gradient arenas have the same layout, padding zero):
//  - zero = 0: all-reduce (sum) of the whole arena over DP, in buckets of bucket_mb,
//    posted together then waited; or of sub-ranges of it (reduce_range), each in
//    buckets of at most bucket_mb.
//  - zero = 1: DP rank r owns its block of the arena, about n / dp elements, and
//    everyone owns the tail (optim/ownership.h: dp_share). The gradients are
//    reduce-scattered into shard_grad (r's block summed over DP), the tail all-reduced
//    in place; after the optimizer has updated the owned values, gather_values
//    all-gathers every rank's block back into the value arena. So optimizer state
//    exists only for the block + tail per module (optim/optimizer.h), 1/dp of the
//    unsharded state.
// wire (train.grad_reduce_dtype): F32 (the default) reduces the f32 gradients as they
// are; BF16 converts them into a bf16 copy (wire_, n elements, allocated once), reduces
// that (half the bytes; each reduction step rounds to bf16) and converts the sums back
// into the f32 gradients (zero = 0) or the f32 shard (zero = 1). The optimizer always
// reads f32 gradients. The values' all-gather (zero = 1) stays f32: master weights are
// never rounded.
// Every rank must call reduce (and gather_values) for the same modules in the same order
// on the same stream kind (the step's `comm` tasks, the trainer's default stream).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/vlm_model.h"
#include "optim/ownership.h"
#include "parallel/communicator.h"

namespace vlm {

class DpGrads {
 public:
  // Only the modules whose `trainable` flag is set are reduced (and get buffers).
  DpGrads(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, Communicator& dp, int zero,
          double bucket_mb, Backend& backend, DType wire = DType::F32);

  int zero() const { return zero_; }
  Communicator& dp() const { return dp_; }
  // Reduces module i's gradients (the rule above).
  void reduce(Stream& s, size_t i);
  // zero = 0: all-reduces elements [begin, end) of module i's arena only, in buckets of
  // at most bucket_elems() from begin. Disjoint ranges covering the arena send the bytes
  // of reduce (the step reduces the backbone's layers this way as their gradients become
  // final, train/step.h). ZeRO-1's reduce-scatter is over the whole arena: reduce only.
  void reduce_range(Stream& s, size_t i, int64_t begin, int64_t end);
  // The elements of one bucket (bucket_mb at the wire's element size).
  int64_t bucket_elems() const;
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
  // Bytes this rank sends for module i per step (the byte counters' rule): the reduced
  // elements (zero = 0: n; zero = 1: the reduce-scatter input + the tail) x the wire size.
  size_t bytes(size_t i) const;
  DType wire() const { return wire_; }
  size_t wire_bytes() const;  // memory of the bf16 copies (0 at F32)

 private:
  std::vector<ModuleParams> modules_;
  Communicator& dp_;
  int zero_;
  double bucket_mb_;
  std::vector<Owned> owned_;
  std::vector<Tensor> gather_tmp_;  // zero = 1: [s] the owned values, the all-gather's input
  DType wire_ = DType::F32;
  std::vector<Tensor> wire_buf_;    // BF16: [n] bf16 per trainable module (+ [s] for the shard)
};

// A module's flat f32 view of a ParamTable arena (values or gradients).
Tensor flat_f32(const Arena& a);

}  // namespace vlm

// Scratch buffers of the scorers (ScratchTensor): a tensor of the shape last asked for, a view
// of a block that only grows. The block is reallocated only when a shape needs more bytes
// than any before, so a run allocates its scratch during the first micro-batch of its
// largest shape, or ahead of time with reserve(): the buffers of the visual tokens,
// whose count changes with every micro-batch's LOD allocation, are reserved for the
// largest count when the stage is planned (RelevanceStage::reserve). A steady run then
// allocates nothing (VlmStep's test counts the blocks: scratch_blocks_allocated()).
// A view taken from a ScratchTensor keeps its block alive (Tensor's storage rule), but
// after a growth it is no longer the ScratchTensor's memory.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

// The number of blocks every ScratchTensor of the process has allocated so far.
inline std::atomic<uint64_t>& scratch_blocks_counter() {
  static std::atomic<uint64_t> n{0};
  return n;
}
inline uint64_t scratch_blocks_allocated() { return scratch_blocks_counter().load(); }

class ScratchTensor : public Tensor {
 public:
  // The block holds at least `bytes` on dev (the view is unchanged unless reallocated).
  void reserve(DeviceKind dev, size_t bytes) {
    if (block_.defined() && block_.device() == dev && block_.nbytes() >= bytes) return;
    block_ = Tensor::empty(backend_for(dev), Shape{int64_t(std::max<size_t>(bytes, 1))}, DType::U8);
    scratch_blocks_counter().fetch_add(1);
    static_cast<Tensor&>(*this) = Tensor{};
  }
  // This tensor becomes the view [s] of dtype dt on dev (first elements of the block).
  const Tensor& resize(DeviceKind dev, Shape s, DType dt) {
    reserve(dev, size_t(s.numel()) * dtype_size(dt));
    static_cast<Tensor&>(*this) = block_.reinterpret(dt, s);
    return *this;
  }

 private:
  Tensor block_;
};

inline const Tensor& scratch(ScratchTensor& t, DeviceKind dev, Shape s, DType dt) { return t.resize(dev, s, dt); }

}  // namespace vlm

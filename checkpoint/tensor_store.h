// The tensors of a checkpoint in either form, as a reader at any layout needs them
// (checkpoint/checkpoint.h; docs/checkpoints.md): the run's state and texts, which
// tensors there are, and any region of one of them.
//  - The single file (step_<N>.h5, open_h5_store): each tensor is read whole, once, to
//    check its checksum, and the region is copied out of it.
//  - The sharded folder (step_<N>/, open_shard_store): only the pieces that overlap the
//    region are read (each whole, to check its checksum), and only the elements of the
//    overlaps are copied; a shard is checked against the index (size, header) the first
//    time one of its pieces is read.
// Every read value is checked (checksum, finite); anything wrong is a UserError naming
// the file and the tensor ("<file>: tensor /model/llm/x ...").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "checkpoint/tensor_region.h"

namespace vlm {

class TensorStore {
 public:
  virtual ~TensorStore() = default;
  const std::string& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  // Every tensor ("model/llm/<name>", "optim/m/vision/<name>", ...) of the groups of
  // `modules` (module names): model/<m>, optim/m/<m>, optim/v/<m>; the sharded form
  // lists every tensor of its index, whatever its group.
  virtual std::vector<std::string> tensors(const std::vector<std::string>& modules) const = 0;
  // The names of the tensors of `group` ("model/llm"); empty when there are none.
  virtual std::vector<std::string> members(const std::string& group) const = 0;
  // The elements `need` of `tensor` (whose shape must be `shape`) into dst, in the
  // region's order (need.numel() floats).
  virtual void read(const std::string& tensor, const Dims& shape, const TensorRegion& need, float* dst) = 0;
  // Bytes of tensor data the checkpoint stores (-1 when the form does not say).
  virtual int64_t data_bytes() const { return -1; }
  // Bytes of tensor data read from disk so far.
  uint64_t bytes_read() const { return bytes_read_; }

 protected:
  std::string path_;
  CheckpointMeta meta_;
  uint64_t bytes_read_ = 0;
};

// A single-file checkpoint (HDF5); UserError naming the file when it is not a complete one.
std::unique_ptr<TensorStore> open_h5_store(const std::string& file);
// A sharded checkpoint's folder: checkpoint/shard_store.h.

}  // namespace vlm

// Reading a sharded checkpoint, step_<N>/ (checkpoint/tensor_store.h; the files:
// checkpoint/shard_format.h). Opening reads and checks index.json and the run's texts;
// a read finds the pieces of the tensor whose boxes meet the region, and of those whose
// runs overlap it reads each piece whole (its checksum) in chunks of bounded size,
// copying out only the overlapping elements. A shard is checked the first time it is
// used: its size is the index's, its trailer and header are whole, the header's
// checksum is the index's and its pieces are the index's pieces of that shard.
// Messages name the file at fault (index.json, a text, a shard) and the tensor.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/shard_format.h"
#include "checkpoint/tensor_store.h"

namespace vlm {

class ShardStore final : public TensorStore {
 public:
  explicit ShardStore(const std::string& dir);
  const CheckpointIndex& index() const { return idx_; }
  std::string index_path() const;
  std::vector<std::string> tensors(const std::vector<std::string>& modules) const override;
  std::vector<std::string> members(const std::string& group) const override;
  void read(const std::string& tensor, const Dims& shape, const TensorRegion& need, float* dst) override;
  int64_t data_bytes() const override;
  // Checks every shard against the index (reads do it for the shards they use).
  void check_shards();

 private:
  const IndexTensor& find(const std::string& tensor, const Dims& shape) const;
  void check_shard(int shard, const std::string& tensor);
  // Reads piece p of tensor t whole, checks it, and copies overlaps (a: position in the
  // piece, b: in dst) into dst.
  void read_piece(const IndexTensor& t, const IndexPiece& p, const std::vector<Overlap>& ov, float* dst);

  CheckpointIndex idx_;
  std::unordered_map<std::string, size_t> by_name_;
  std::vector<bool> checked_;  // per shard
};

}  // namespace vlm

// The sharded checkpoint's files (docs/checkpoints.md, "Format details"): the shard file
// each rank writes, and the index that commits a save. A save is a folder step_<N>/:
//   rank_<r>.<save>.shard   one per world rank r: the f32 little-endian data of its
//                           pieces back to back from byte 0, then the shard header
//                           (JSON), its length (u64 little-endian) and the 8 bytes
//                           "VLMSHARD"
//   config.<save>.ini, options.<save>.ini, tokenizer.<save>.json
//                           the run's texts (checkpoint/checkpoint_state.h), rank 0's
//   index.json              written last: the run state, the texts' files, every shard
//                           (file, size, CRC-32C of its header) and every tensor (name,
//                           logical shape) with every piece of it (shard, region, byte
//                           offset, CRC-32C of its data)
// <save> is an id every file of one save shares, so a save over an existing step_<N>/
// never touches the files of the index it replaces (they are removed after the commit).
// A piece is a region of one tensor (checkpoint/tensor_region.h) and its data; the
// pieces of a tensor hold each of its elements once.
// Shard header (JSON object): format "vlm-checkpoint-shard", version 1, save, step,
// rank, world, pieces: [{tensor, shape, offset, extent, range: [begin, end], at, crc32c}].
// Index (JSON object): crc32c, format "vlm-checkpoint-index", version 2, save, step,
// saved_tp, saved_dp, zero, global_batch, micro_batches, state: {seed, sampler_seed,
// sampler_epoch, sampler_step}, texts: {config, options, tokenizer: {file, bytes,
// crc32c}}, shards: [{file, rank, bytes, header_crc32c}], tensors: [{name, shape,
// pieces: [{shard, offset, extent, range, at, crc32c}]}]. The text begins
// {"crc32c":<C>, where C is the CRC-32C of every byte after that comma, so a changed
// byte anywhere (the state included, which nothing else checks) is refused. Version 1
// (no checksum) is read too.
// The parsers take bytes and check everything before anything is used (unknown or
// missing keys, types, ranges, file names, regions inside their tensor, pieces back to
// back inside their shard, each tensor's pieces adding up to its size): a UserError
// "<file>: <what is wrong>" otherwise. They depend on base/ only (they are fuzzed).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "checkpoint/tensor_region.h"

namespace vlm {

inline constexpr const char* kIndexName = "index.json";
inline constexpr const char* kIndexFormat = "vlm-checkpoint-index";
inline constexpr const char* kShardFormat = "vlm-checkpoint-shard";
inline constexpr int64_t kShardedVersion = 1;  // the shard header's
inline constexpr int64_t kIndexVersion = 2;    // the index's (2 added its checksum; 1 is read too)
inline constexpr std::string_view kShardMagic = "VLMSHARD";
inline constexpr int64_t kShardTrailerBytes = 16;  // header length (u64 LE) + magic
inline constexpr int64_t kMaxShardHeaderBytes = int64_t(1) << 30;
inline constexpr int64_t kMaxIndexBytes = int64_t(1) << 30;

// "rank_3.<save>.shard"
std::string shard_file_name(int rank, const std::string& save);

// ---- shard header ----
struct ShardPiece {
  std::string tensor;  // "model/llm/<name>", "optim/m/<module>/<name>", ...
  Dims shape;          // the tensor's logical (Hugging Face) shape
  TensorRegion region;
  int64_t at = 0;      // byte offset of its data in the shard
  uint32_t crc32c = 0; // of its data
  int64_t bytes() const { return 4 * region.numel(); }
};

struct ShardHeader {
  std::string save;
  int64_t step = 0;
  int rank = 0, world = 1;
  std::vector<ShardPiece> pieces;  // back to back from byte 0, in this order
  int64_t data_bytes() const;
};

std::string shard_header_json(const ShardHeader& h);
// A shard file's last kShardTrailerBytes bytes for a header of header_bytes: the length
// (u64 little-endian), then kShardMagic.
std::string shard_trailer(size_t header_bytes);
// The header's length from a shard file's last kShardTrailerBytes bytes and its size.
int64_t shard_header_length(std::string_view trailer, int64_t file_bytes, const std::string& file);
// The header of a shard whose data area is data_bytes long.
ShardHeader parse_shard_header(std::string_view json, const std::string& file, int64_t data_bytes);
// The header of a whole shard file in memory (the two above).
ShardHeader parse_shard(std::string_view file_bytes, const std::string& file);

// ---- index ----
struct TextFile {
  std::string file;
  int64_t bytes = 0;
  uint32_t crc32c = 0;
};

struct ShardRef {
  std::string file;
  int rank = 0;
  int64_t bytes = 0;  // the whole file
  uint32_t header_crc32c = 0;
};

struct IndexPiece {
  int shard = 0;  // into CheckpointIndex::shards
  TensorRegion region;
  int64_t at = 0;
  uint32_t crc32c = 0;
  int64_t bytes() const { return 4 * region.numel(); }
};

struct IndexTensor {
  std::string name;
  Dims shape;
  std::vector<IndexPiece> pieces;
};

struct CheckpointIndex {
  std::string save;
  CheckpointState state;
  TextFile config, options, tokenizer;
  std::vector<ShardRef> shards;
  std::vector<IndexTensor> tensors;  // in the order of their first piece
};

// The index of a save from its texts and every rank's shard header as written (JSON, in
// world rank order); an inconsistency between the headers is an internal error (ours).
CheckpointIndex build_index(const std::string& save, const CheckpointState& state, const TextFile& config,
                            const TextFile& options, const TextFile& tokenizer,
                            const std::vector<std::string>& headers);
std::string index_json(const CheckpointIndex& idx);
CheckpointIndex parse_index(std::string_view bytes, const std::string& file);

}  // namespace vlm

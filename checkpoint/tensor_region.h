// A region of a logical tensor: the unit in which a sharded checkpoint stores and reads
// tensors (checkpoint/shard_format.h; docs/checkpoints.md). A region is a box of the
// tensor (an offset and an extent per dimension: a TP slice is one) and a range of the
// box's elements in row-major order (a ZeRO block cuts a slice's flat order anywhere).
// Its elements, in that order, are the data of a piece in a shard file, or what a
// reader asks for. Two regions of one tensor meet in runs of consecutive elements of
// the tensor, so a reader at any layout copies exactly the elements it needs out of the
// pieces that hold them (overlaps).
// Depends on nothing but the standard library (the format's parsers are fuzzed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vlm {

using Dims = std::vector<int64_t>;

int64_t dims_numel(const Dims& d);  // 1 for no dimensions
std::string dims_str(const Dims& d);  // "[32,16]"

struct TensorRegion {
  Dims offset, extent;          // the box: offset[i] + extent[i] <= shape[i]
  int64_t begin = 0, end = 0;   // its elements [begin, end) in row-major order of the box
  int64_t numel() const { return end - begin; }
  bool operator==(const TensorRegion&) const = default;
};

// The whole tensor.
TensorRegion whole_region(const Dims& shape);
// "" when r is a region of a tensor of `shape` (box inside it, 0 <= begin <= end <= box
// elements), else what is wrong ("the box leaves the tensor in dimension 1").
std::string region_problem(const Dims& shape, const TensorRegion& r);
// "[0:16,0:32] elements 0..512" for messages.
std::string region_str(const TensorRegion& r);

// Elements [at, at + len) of the tensor in row-major order.
struct TensorRun {
  int64_t at = 0, len = 0;
};
// The region's elements as runs of the tensor, in the region's order (so increasing and
// disjoint); r must be a valid region of `shape` (region_problem == "").
std::vector<TensorRun> region_runs(const Dims& shape, const TensorRegion& r);

// Where two regions of one tensor meet: `len` elements at position `a` of the first's
// order and `b` of the second's.
struct Overlap {
  int64_t a = 0, b = 0, len = 0;
};
std::vector<Overlap> overlaps(const std::vector<TensorRun>& first, const std::vector<TensorRun>& second);

}  // namespace vlm

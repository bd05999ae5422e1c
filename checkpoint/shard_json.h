// The JSON pieces the shard header and the index share (checkpoint/shard_format.h): their
// writers, and readers that check a member before it is used. Each reader throws a
// UserError "<what>: <key> ..." naming the object (what) and the member on a missing key,
// a wrong type or a value out of its range. Depends on base/ only (the readers are
// fuzzed: tests/fuzz).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "checkpoint/tensor_region.h"

namespace vlm::shard_json {

using json::Value;

inline constexpr int64_t kMaxDim = int64_t(1) << 50;    // elements of one dimension, and of a tensor
inline constexpr int64_t kMaxBytes = int64_t(1) << 62;  // a file
inline constexpr size_t kMaxDims = 8;

Value int_value(int64_t v);
Value dims_value(const Dims& d);
// Sets o's offset, extent and range ([begin, end]) from r.
void put_region(Value& o, const TensorRegion& r);

// Refuses members of `o` other than `keys` (a key the writer never writes is damage).
void only_keys(const Value& o, std::initializer_list<std::string_view> keys, const std::string& what);
// Checks the format's name of a file's root object and that its version is one of
// oldest..newest; returns the version.
int64_t check_format(const Value& root, const char* format, int64_t oldest, int64_t newest, const std::string& file);
int64_t int_at(const Value& o, std::string_view key, int64_t lo, int64_t hi, const std::string& what);
// At most kMaxDims entries, each in [0, hi].
Dims dims_at(const Value& o, std::string_view key, int64_t hi, const std::string& what);
// o's "shape": at most 2^50 elements.
Dims shape_at(const Value& o, const std::string& what);
// The region of object o inside a tensor of `shape`, holding at least one element.
TensorRegion region_at(const Value& o, const Dims& shape, const std::string& what);
// 1 to max_bytes bytes, no control character.
std::string string_at(const Value& o, std::string_view key, size_t max_bytes, const std::string& what);
// o's "save": a hexadecimal id of at most 32 digits.
std::string save_at(const Value& o, const std::string& what);
// o's "file": a file of the checkpoint's folder, a plain name, never a path elsewhere.
std::string file_at(const Value& o, const std::string& what);
// A tensor name (at most 1,024 bytes, not starting with '/').
std::string tensor_name_at(const Value& o, std::string_view key, const std::string& what);
uint32_t crc_at(const Value& o, std::string_view key, const std::string& what);
// Pieces (at, bytes) of one shard must not share bytes and must lie in its data area.
void check_disjoint(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t data_bytes, const std::string& what);

}  // namespace vlm::shard_json

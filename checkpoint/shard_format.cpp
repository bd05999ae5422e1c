// The sharded checkpoint's shard file: its name, header and trailer
// (checkpoint/shard_format.h).
#include "checkpoint/shard_format.h"

#include "base/error.h"
#include "checkpoint/shard_json.h"

namespace vlm {

using namespace shard_json;

std::string shard_file_name(int rank, const std::string& save) { return cat("rank_", rank, ".", save, ".shard"); }

int64_t ShardHeader::data_bytes() const {
  int64_t n = 0;
  for (const ShardPiece& p : pieces) n += p.bytes();
  return n;
}

std::string shard_header_json(const ShardHeader& h) {
  Value o = Value::object();
  o.set("format", Value::string(kShardFormat));
  o.set("version", int_value(kShardedVersion));
  o.set("save", Value::string(h.save));
  o.set("step", int_value(h.step));
  o.set("rank", int_value(h.rank));
  o.set("world", int_value(h.world));
  Value::Array pieces;
  for (const ShardPiece& p : h.pieces) {
    Value e = Value::object();
    e.set("tensor", Value::string(p.tensor));
    e.set("shape", dims_value(p.shape));
    put_region(e, p.region);
    e.set("at", int_value(p.at));
    e.set("crc32c", int_value(p.crc32c));
    pieces.push_back(std::move(e));
  }
  o.set("pieces", Value::array(std::move(pieces)));
  return json::write(o);
}

std::string shard_trailer(size_t header_bytes) {
  std::string t(size_t(kShardTrailerBytes), '\0');
  for (int i = 0; i < 8; ++i) t[size_t(i)] = char(uint64_t(header_bytes) >> (8 * i));
  t.replace(8, kShardMagic.size(), kShardMagic);
  return t;
}

int64_t shard_header_length(std::string_view trailer, int64_t file_bytes, const std::string& file) {
  VLM_REQUIRE(file_bytes >= kShardTrailerBytes && trailer.size() == size_t(kShardTrailerBytes), file, ": ",
              file_bytes, " bytes, too short for a shard file (truncated?)");
  VLM_REQUIRE(trailer.substr(8) == kShardMagic, file, ": not a vlm shard file (no 'VLMSHARD' at its end: truncated?)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(trailer[size_t(i)]);
  VLM_REQUIRE(n >= 2 && n <= uint64_t(kMaxShardHeaderBytes) && int64_t(n) <= file_bytes - kShardTrailerBytes, file,
              ": its header length ", n, " does not fit the file's ", file_bytes, " bytes");
  return int64_t(n);
}

ShardHeader parse_shard_header(std::string_view text, const std::string& file, int64_t data_bytes) {
  const Value root = json::parse(text, file + " (shard header)", {size_t(kMaxShardHeaderBytes), 16});
  check_format(root, kShardFormat, kShardedVersion, kShardedVersion, file);
  only_keys(root, {"format", "version", "save", "step", "rank", "world", "pieces"}, file);
  ShardHeader h;
  h.save = save_at(root, file);
  h.step = int_at(root, "step", 0, INT64_MAX, file);
  h.world = int(int_at(root, "world", 1, 1 << 24, file));
  h.rank = int(int_at(root, "rank", 0, h.world - 1, file));
  const Value::Array& pieces = root.at("pieces", file).as_array(file + ": pieces");
  int64_t at = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string what = cat(file, ": pieces[", i, "]");
    const Value& o = pieces[i];
    only_keys(o, {"tensor", "shape", "offset", "extent", "range", "at", "crc32c"}, what);
    ShardPiece p;
    p.tensor = tensor_name_at(o, "tensor", what);
    const std::string tw = cat(file, ": tensor /", p.tensor, ", piece ", i);
    p.shape = shape_at(o, tw);
    p.region = region_at(o, p.shape, tw);
    p.at = int_at(o, "at", 0, kMaxBytes, tw);
    p.crc32c = crc_at(o, "crc32c", tw);
    VLM_REQUIRE(p.at == at, tw, ": starts at byte ", p.at, ", expected ", at, " (pieces lie back to back)");
    at += p.bytes();
    h.pieces.push_back(std::move(p));
  }
  VLM_REQUIRE(data_bytes < 0 || at == data_bytes, file, ": its pieces hold ", at, " bytes, its data area has ",
              data_bytes);
  return h;
}

ShardHeader parse_shard(std::string_view bytes, const std::string& file) {
  const int64_t size = int64_t(bytes.size());
  const int64_t n = shard_header_length(size >= kShardTrailerBytes ? bytes.substr(size_t(size - kShardTrailerBytes))
                                                                   : std::string_view(),
                                        size, file);
  const int64_t data = size - kShardTrailerBytes - n;
  return parse_shard_header(bytes.substr(size_t(data), size_t(n)), file, data);
}

}  // namespace vlm

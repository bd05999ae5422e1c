// The sharded checkpoint's shard header and index (checkpoint/shard_format.h).
#include "checkpoint/shard_format.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "base/json.h"
#include "io/crc32c.h"

namespace vlm {

namespace {

using json::Value;

constexpr int64_t kMaxDim = int64_t(1) << 50;    // elements of one dimension, and of a tensor
constexpr int64_t kMaxBytes = int64_t(1) << 62;  // a file
constexpr size_t kMaxDims = 8;

Value int_value(int64_t v) { return Value::integer(v); }

Value dims_value(const Dims& d) {
  Value::Array a;
  for (int64_t x : d) a.push_back(int_value(x));
  return Value::array(std::move(a));
}

void put_region(Value& o, const TensorRegion& r) {
  o.set("offset", dims_value(r.offset));
  o.set("extent", dims_value(r.extent));
  o.set("range", dims_value({r.begin, r.end}));
}

// Refuses members of `o` other than `keys` (a key the writer never writes is damage).
void only_keys(const Value& o, std::initializer_list<std::string_view> keys, const std::string& what) {
  for (const auto& [k, v] : o.as_object(what))
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) throw UserError(cat(what, ": unexpected key '", k, "'"));
}

int64_t int_at(const Value& o, std::string_view key, int64_t lo, int64_t hi, const std::string& what) {
  return json::int_in(o.at(key, what), lo, hi, cat(what, ": ", key));
}

Dims dims_at(const Value& o, std::string_view key, int64_t hi, const std::string& what) {
  const Value::Array& a = o.at(key, what).as_array(cat(what, ": ", key));
  VLM_REQUIRE(a.size() <= kMaxDims, what, ": ", key, " has ", a.size(), " entries (at most ", kMaxDims, ")");
  Dims d;
  for (size_t i = 0; i < a.size(); ++i) d.push_back(json::int_in(a[i], 0, hi, cat(what, ": ", key, "[", i, "]")));
  return d;
}

Dims shape_at(const Value& o, const std::string& what) {
  const Dims s = dims_at(o, "shape", kMaxDim, what);
  int64_t n = 1;
  for (int64_t x : s) {
    VLM_REQUIRE(x == 0 || n <= kMaxDim / x, what, ": shape ", dims_str(s), " has more than 2^50 elements");
    n *= x;
  }
  return s;
}

// The region of object o inside a tensor of `shape`, holding at least one element.
TensorRegion region_at(const Value& o, const Dims& shape, const std::string& what) {
  TensorRegion r;
  r.offset = dims_at(o, "offset", kMaxDim, what);
  r.extent = dims_at(o, "extent", kMaxDim, what);
  const Dims range = dims_at(o, "range", kMaxDim, what);
  VLM_REQUIRE(range.size() == 2, what, ": range has ", range.size(), " entries (expected [begin, end])");
  r.begin = range[0], r.end = range[1];
  const std::string problem = region_problem(shape, r);
  VLM_REQUIRE(problem.empty(), what, ": ", problem);
  VLM_REQUIRE(r.numel() > 0, what, ": the piece holds no element");
  return r;
}

std::string string_at(const Value& o, std::string_view key, size_t max_bytes, const std::string& what) {
  const std::string& s = o.at(key, what).as_string(cat(what, ": ", key));
  VLM_REQUIRE(!s.empty() && s.size() <= max_bytes, what, ": ", key, " must have 1 to ", max_bytes, " bytes");
  for (unsigned char c : s) VLM_REQUIRE(c >= 0x20, what, ": ", key, " holds a control character");
  return s;
}

std::string save_at(const Value& o, const std::string& what) {
  const std::string s = string_at(o, "save", 32, what);
  for (char c : s)
    VLM_REQUIRE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), what, ": save '", s, "' is not a hexadecimal id");
  return s;
}

// A file of the checkpoint's folder: a plain name, never a path elsewhere.
std::string file_at(const Value& o, const std::string& what) {
  const std::string f = string_at(o, "file", 255, what);
  VLM_REQUIRE(f.find('/') == std::string::npos && f[0] != '.', what, ": file '", f,
              "' is not a plain file name of the checkpoint's folder");
  return f;
}

std::string tensor_name_at(const Value& o, std::string_view key, const std::string& what) {
  const std::string n = string_at(o, key, 1024, what);
  VLM_REQUIRE(n[0] != '/', what, ": tensor name '", n, "' starts with '/'");
  return n;
}

uint32_t crc_at(const Value& o, std::string_view key, const std::string& what) {
  return uint32_t(int_at(o, key, 0, int64_t(UINT32_MAX), what));
}

void check_format(const Value& root, const char* format, const std::string& file) {
  root.as_object(file);
  const Value* f = root.find("format");
  VLM_REQUIRE(f && f->is_string() && f->as_string() == format, file, ": not a vlm checkpoint file (format '", format,
              "' expected)");
  const int64_t v = int_at(root, "version", 0, INT64_MAX, file);
  VLM_REQUIRE(v == kShardedVersion, file, ": version ", v, " (this vlm reads version ", kShardedVersion, ")");
}

// Pieces (at, bytes) of one shard must not share bytes and must lie in its data area.
void check_disjoint(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t data_bytes, const std::string& what) {
  std::sort(spans.begin(), spans.end());
  for (size_t i = 0; i < spans.size(); ++i) {
    VLM_REQUIRE(spans[i].first + spans[i].second <= data_bytes, what, ": a piece at byte ", spans[i].first,
                " runs past the data area (", data_bytes, " bytes)");
    VLM_REQUIRE(i == 0 || spans[i - 1].first + spans[i - 1].second <= spans[i].first, what,
                ": two pieces share the bytes at ", spans[i].first);
  }
}

Value text_value(const TextFile& t) {
  Value o = Value::object();
  o.set("file", Value::string(t.file));
  o.set("bytes", int_value(t.bytes));
  o.set("crc32c", int_value(t.crc32c));
  return o;
}

TextFile text_at(const Value& texts, std::string_view key, const std::string& what) {
  const std::string w = cat(what, ": texts.", key);
  const Value& o = texts.at(key, what + ": texts");
  only_keys(o, {"file", "bytes", "crc32c"}, w);
  return {file_at(o, w), int_at(o, "bytes", 0, kMaxBytes, w), crc_at(o, "crc32c", w)};
}

}  // namespace

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
  check_format(root, kShardFormat, file);
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

CheckpointIndex build_index(const std::string& save, const CheckpointState& state, const TextFile& config,
                            const TextFile& options, const TextFile& tokenizer,
                            const std::vector<std::string>& headers) {
  CheckpointIndex idx;
  idx.save = save, idx.state = state, idx.config = config, idx.options = options, idx.tokenizer = tokenizer;
  std::unordered_map<std::string, size_t> at;
  for (size_t r = 0; r < headers.size(); ++r) {
    const std::string file = shard_file_name(int(r), save);
    const ShardHeader h = parse_shard_header(headers[r], file, -1);
    VLM_ASSERT(h.save == save && h.rank == int(r) && h.world == int(headers.size()), file, ": header of another save");
    idx.shards.push_back({file, h.rank, h.data_bytes() + int64_t(headers[r].size()) + kShardTrailerBytes,
                          crc32c(headers[r].data(), headers[r].size())});
    for (const ShardPiece& p : h.pieces) {
      auto [it, fresh] = at.emplace(p.tensor, idx.tensors.size());
      if (fresh) idx.tensors.push_back({p.tensor, p.shape, {}});
      IndexTensor& t = idx.tensors[it->second];
      VLM_ASSERT(t.shape == p.shape, "tensor ", p.tensor, ": pieces of shapes ", dims_str(t.shape), " and ",
                 dims_str(p.shape));
      t.pieces.push_back({int(r), p.region, p.at, p.crc32c});
    }
  }
  for (const IndexTensor& t : idx.tensors) {
    int64_t n = 0;
    for (const IndexPiece& p : t.pieces) n += p.region.numel();
    VLM_ASSERT(n == dims_numel(t.shape), "tensor ", t.name, ": pieces hold ", n, " of ", dims_numel(t.shape),
               " elements");
  }
  return idx;
}

std::string index_json(const CheckpointIndex& idx) {
  const CheckpointState& s = idx.state;
  Value o = Value::object();
  o.set("format", Value::string(kIndexFormat));
  o.set("version", int_value(kShardedVersion));
  o.set("save", Value::string(idx.save));
  o.set("step", int_value(s.step));
  o.set("saved_tp", int_value(s.saved_tp));
  o.set("saved_dp", int_value(s.saved_dp));
  o.set("zero", int_value(s.zero));
  o.set("global_batch", int_value(s.global_batch));
  o.set("micro_batches", int_value(s.micro_batches));
  Value st = Value::object();
  st.set("seed", int_value(int64_t(s.seed)));
  st.set("sampler_seed", int_value(int64_t(s.sampler.seed)));
  st.set("sampler_epoch", int_value(s.sampler.epoch));
  st.set("sampler_step", int_value(s.sampler.step));
  o.set("state", std::move(st));
  Value texts = Value::object();
  texts.set("config", text_value(idx.config));
  texts.set("options", text_value(idx.options));
  texts.set("tokenizer", text_value(idx.tokenizer));
  o.set("texts", std::move(texts));
  Value::Array shards, tensors;
  for (const ShardRef& r : idx.shards) {
    Value e = Value::object();
    e.set("file", Value::string(r.file));
    e.set("rank", int_value(r.rank));
    e.set("bytes", int_value(r.bytes));
    e.set("header_crc32c", int_value(r.header_crc32c));
    shards.push_back(std::move(e));
  }
  for (const IndexTensor& t : idx.tensors) {
    Value e = Value::object();
    e.set("name", Value::string(t.name));
    e.set("shape", dims_value(t.shape));
    Value::Array pieces;
    for (const IndexPiece& p : t.pieces) {
      Value q = Value::object();
      q.set("shard", int_value(p.shard));
      put_region(q, p.region);
      q.set("at", int_value(p.at));
      q.set("crc32c", int_value(p.crc32c));
      pieces.push_back(std::move(q));
    }
    e.set("pieces", Value::array(std::move(pieces)));
    tensors.push_back(std::move(e));
  }
  o.set("shards", Value::array(std::move(shards)));
  o.set("tensors", Value::array(std::move(tensors)));
  return json::write(o);
}

CheckpointIndex parse_index(std::string_view bytes, const std::string& file) {
  const Value root = json::parse(bytes, file, {size_t(kMaxIndexBytes), 16});
  check_format(root, kIndexFormat, file);
  only_keys(root, {"format", "version", "save", "step", "saved_tp", "saved_dp", "zero", "global_batch", "micro_batches",
                   "state", "texts", "shards", "tensors"},
            file);
  CheckpointIndex idx;
  CheckpointState& s = idx.state;
  idx.save = save_at(root, file);
  s.step = int_at(root, "step", 0, INT64_MAX, file);
  s.saved_tp = int(int_at(root, "saved_tp", 1, 1 << 20, file));
  s.saved_dp = int(int_at(root, "saved_dp", 1, 1 << 20, file));
  s.zero = int(int_at(root, "zero", 0, 3, file));
  s.global_batch = int_at(root, "global_batch", 1, INT64_MAX, file);
  s.micro_batches = int_at(root, "micro_batches", 1, INT64_MAX, file);
  const Value& st = root.at("state", file);
  const std::string sw = file + ": state";
  only_keys(st, {"seed", "sampler_seed", "sampler_epoch", "sampler_step"}, sw);
  s.seed = uint64_t(int_at(st, "seed", INT64_MIN, INT64_MAX, sw));
  s.sampler.seed = uint64_t(int_at(st, "sampler_seed", INT64_MIN, INT64_MAX, sw));
  s.sampler.epoch = int_at(st, "sampler_epoch", 0, INT64_MAX, sw);
  s.sampler.step = int_at(st, "sampler_step", 0, INT64_MAX, sw);
  const Value& texts = root.at("texts", file);
  only_keys(texts, {"config", "options", "tokenizer"}, file + ": texts");
  idx.config = text_at(texts, "config", file);
  idx.options = text_at(texts, "options", file);
  idx.tokenizer = text_at(texts, "tokenizer", file);

  const Value::Array& shards = root.at("shards", file).as_array(file + ": shards");
  VLM_REQUIRE(!shards.empty() && shards.size() <= (size_t(1) << 24), file, ": shards must list 1 to 2^24 files");
  std::unordered_set<std::string> files;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string what = cat(file, ": shards[", i, "]");
    only_keys(shards[i], {"file", "rank", "bytes", "header_crc32c"}, what);
    ShardRef r;
    r.file = file_at(shards[i], what);
    r.rank = int(int_at(shards[i], "rank", 0, (1 << 24) - 1, what));
    r.bytes = int_at(shards[i], "bytes", kShardTrailerBytes + 2, kMaxBytes, what);
    r.header_crc32c = crc_at(shards[i], "header_crc32c", what);
    VLM_REQUIRE(files.insert(r.file).second, what, ": shard file ", r.file, " is listed twice");
    idx.shards.push_back(std::move(r));
  }

  const Value::Array& tensors = root.at("tensors", file).as_array(file + ": tensors");
  std::unordered_set<std::string> names;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> spans(idx.shards.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string what = cat(file, ": tensors[", i, "]");
    only_keys(tensors[i], {"name", "shape", "pieces"}, what);
    IndexTensor t;
    t.name = tensor_name_at(tensors[i], "name", what);
    const std::string tw = cat(file, ": tensor /", t.name);
    VLM_REQUIRE(names.insert(t.name).second, tw, " is listed twice");
    t.shape = shape_at(tensors[i], tw);
    const int64_t numel = dims_numel(t.shape);
    int64_t held = 0;
    const Value::Array& pieces = tensors[i].at("pieces", tw).as_array(tw + ": pieces");
    for (size_t k = 0; k < pieces.size(); ++k) {
      const std::string pw = cat(tw, ", piece ", k);
      only_keys(pieces[k], {"shard", "offset", "extent", "range", "at", "crc32c"}, pw);
      IndexPiece p;
      p.shard = int(int_at(pieces[k], "shard", 0, int64_t(idx.shards.size()) - 1, pw));
      p.region = region_at(pieces[k], t.shape, pw);
      p.at = int_at(pieces[k], "at", 0, kMaxBytes, pw);
      p.crc32c = crc_at(pieces[k], "crc32c", pw);
      held += p.region.numel();
      VLM_REQUIRE(held <= numel, tw, ": its pieces hold more than its ", numel, " elements");
      spans[size_t(p.shard)].push_back({p.at, p.bytes()});
      t.pieces.push_back(std::move(p));
    }
    VLM_REQUIRE(held == numel, tw, ": its pieces hold ", held, " of its ", numel, " elements (a piece is missing)");
    idx.tensors.push_back(std::move(t));
  }
  for (size_t k = 0; k < spans.size(); ++k)
    check_disjoint(spans[k], idx.shards[k].bytes - kShardTrailerBytes, cat(file, ": shard ", idx.shards[k].file));
  return idx;
}

}  // namespace vlm

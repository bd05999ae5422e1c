// The sharded checkpoint's index (checkpoint/shard_format.h): built from the shard
// headers, written, and read back with every check.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "checkpoint/shard_format.h"
#include "checkpoint/shard_json.h"
#include "io/crc32c.h"

namespace vlm {

using namespace shard_json;

namespace {

// {file, bytes, crc32c} of a text file of the save.
Value text_value(const TextFile& t) {
  Value o = Value::object();
  o.set("file", Value::string(t.file));
  o.set("bytes", int_value(t.bytes));
  o.set("crc32c", int_value(t.crc32c));
  return o;
}

constexpr std::string_view kChecksumHead = "{\"crc32c\":";

// Whether the index's checksum (version 2) matches the bytes after it.
bool checksum_matches(std::string_view bytes, const Value& root, const std::string& file) {
  const uint32_t want = crc_at(root, "crc32c", file);
  if (bytes.substr(0, kChecksumHead.size()) != kChecksumHead) return false;
  const size_t comma = bytes.find(',', kChecksumHead.size());
  if (comma == std::string_view::npos) return false;
  return crc32c(bytes.data() + comma + 1, bytes.size() - comma - 1) == want;
}

TextFile text_at(const Value& texts, std::string_view key, const std::string& what) {
  const std::string w = cat(what, ": texts.", key);
  const Value& o = texts.at(key, what + ": texts");
  only_keys(o, {"file", "bytes", "crc32c"}, w);
  return {file_at(o, w), int_at(o, "bytes", 0, kMaxBytes, w), crc_at(o, "crc32c", w)};
}

}  // namespace

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
  o.set("version", int_value(kIndexVersion));
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
  // The checksum first, over the rest of the object (the writer's text, after its '{').
  const std::string body = json::write(o).substr(1);
  return cat(kChecksumHead, crc32c(body.data(), body.size()), ",", body);
}

CheckpointIndex parse_index(std::string_view bytes, const std::string& file) {
  const Value root = json::parse(bytes, file, {size_t(kMaxIndexBytes), 16});
  const int64_t version = check_format(root, kIndexFormat, 1, kIndexVersion, file);
  VLM_REQUIRE((version >= 2) == (root.find("crc32c") != nullptr), file, ": version ", version,
              version >= 2 ? " without its checksum (crc32c)" : " with a checksum (crc32c), which version 1 lacks");
  only_keys(root,
            {"crc32c", "format", "version", "save", "step", "saved_tp", "saved_dp", "zero", "global_batch",
             "micro_batches", "state", "texts", "shards", "tensors"},
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
  check_data_position(s, sw);
  const Value& texts = root.at("texts", file);
  only_keys(texts, {"config", "options", "tokenizer"}, file + ": texts");
  idx.config = text_at(texts, "config", file);
  idx.options = text_at(texts, "options", file);
  idx.tokenizer = text_at(texts, "tokenizer", file);

  const Value::Array& shards = root.at("shards", file).as_array(file + ": shards");
  VLM_REQUIRE(!shards.empty() && shards.size() <= (size_t(1) << 24), file, ": shards must list 1 to 2^24 files");
  // Every rank of the saving run wrote one shard (checkpoint/checkpoint_write.cpp).
  const int64_t world = int64_t(s.saved_tp) * s.saved_dp;
  VLM_REQUIRE(int64_t(shards.size()) == world, file, ": ", shards.size(), " shards for the ", world,
              " ranks of saved_tp ", s.saved_tp, " x saved_dp ", s.saved_dp, " (every rank writes one)");
  std::unordered_set<std::string> files;
  std::unordered_set<int> ranks;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string what = cat(file, ": shards[", i, "]");
    only_keys(shards[i], {"file", "rank", "bytes", "header_crc32c"}, what);
    ShardRef r;
    r.file = file_at(shards[i], what);
    r.rank = int(int_at(shards[i], "rank", 0, world - 1, what));
    VLM_REQUIRE(ranks.insert(r.rank).second, what, ": rank ", r.rank, " has another shard already");
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
  // Last, so that the checks above name what a damaged text breaks where they can.
  VLM_REQUIRE(version < 2 || checksum_matches(bytes, root, file), file,
              ": its bytes do not match its checksum (crc32c): the index was changed after it was written");
  return idx;
}

}  // namespace vlm

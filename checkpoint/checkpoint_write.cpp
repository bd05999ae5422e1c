// Writing checkpoints (checkpoint/checkpoint.h): every rank its shard, then world rank 0
// the texts, the index, `latest`, and the pruning.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "base/config.h"
#include "base/error.h"
#include "base/file_read.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_pieces.h"
#include "checkpoint/shard_format.h"
#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "optim/optimizer.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"

namespace vlm {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kChunkFloats = int64_t(4) << 20;  // 16 MiB per device-to-host copy

// VLM_FAULT_CKPT_KILL=<n>[@<rank>]: world rank <rank> (every rank when omitted) kills
// itself (SIGKILL) at its n-th event of a save (checkpoint/checkpoint.h).
void fault_tick(int rank) {
  static const std::pair<long, int> at = [] {
    const char* e = std::getenv("VLM_FAULT_CKPT_KILL");
    if (!e) return std::pair<long, int>{0, -1};
    const char* r = std::strchr(e, '@');
    return std::pair<long, int>{std::atol(e), r ? std::atoi(r + 1) : -1};
  }();
  static long events = 0;
  if (at.first > 0 && (at.second < 0 || at.second == rank) && ++events == at.first) std::raise(SIGKILL);
}

// A fresh id for the files of one save (checkpoint/shard_format.h).
std::string new_save_id() {
  std::random_device rd;
  const uint64_t t = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  const uint64_t x = (uint64_t(rd()) << 32 ^ rd()) ^ t ^ (uint64_t(getpid()) << 16);
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", (unsigned long long)x);
  return s;
}

class ShardOut {
 public:
  explicit ShardOut(const std::string& path) : out_(path) {
    f_ = std::fopen(out_.temp_path().c_str(), "wb");
    VLM_REQUIRE(f_, path, ": cannot write (", std::strerror(errno), ")");
  }
  ~ShardOut() {
    if (f_) std::fclose(f_);
  }
  void write(const void* p, size_t n) {
    VLM_REQUIRE(std::fwrite(p, 1, n, f_) == n, out_.path(), ": write failed (", std::strerror(errno), ")");
  }
  void commit() {
    const bool closed = std::fclose(f_) == 0;
    f_ = nullptr;
    VLM_REQUIRE(closed, out_.path(), ": write failed (", std::strerror(errno), ")");
    out_.commit();
  }

 private:
  AtomicFile out_;
  std::FILE* f_ = nullptr;
};

// Writes this rank's shard: every piece's data from its buffer, then the header and the
// trailer. Returns the header as written.
std::string write_shard(const std::string& folder, ShardHeader h, const std::vector<StatePiece>& pieces,
                        const std::vector<ModuleParams>& mods, const AdamW& opt) {
  ShardOut out(folder + "/" + shard_file_name(h.rank, h.save));
  int64_t at = 0;
  for (const StatePiece& p : pieces) {
    const Tensor src = piece_storage(mods, &opt, p).sub(0, Shape{p.region.numel()});
    uint32_t crc = 0;
    for (int64_t k = 0; k < p.region.numel(); k += kChunkFloats) {
      const std::vector<float> v = to_vector_f32(src.sub(k, Shape{std::min(kChunkFloats, p.region.numel() - k)}));
      crc = crc32c(v.data(), v.size() * 4, crc);
      out.write(v.data(), v.size() * 4);
    }
    h.pieces.push_back({p.tensor, p.shape, p.region, at, crc});
    at += 4 * p.region.numel();
    fault_tick(h.rank);
  }
  const std::string json = shard_header_json(h);
  const std::string trailer = shard_trailer(json.size());
  out.write(json.data(), json.size());
  out.write(trailer.data(), trailer.size());
  out.commit();
  sync_folder(folder);
  fault_tick(h.rank);
  return json;
}

TextFile write_text(const std::string& folder, const std::string& name, const std::string& text) {
  write_file_atomic(folder + "/" + name, text);
  return {name, int64_t(text.size()), crc32c(text.data(), text.size())};
}

// Removes the files of `folder` that the index does not name (an earlier save of the
// same step, a killed save's leftovers).
void clean_folder(const std::string& folder, const CheckpointIndex& idx) {
  std::set<std::string> keep{kIndexName, idx.config.file, idx.options.file, idx.tokenizer.file};
  for (const ShardRef& r : idx.shards) keep.insert(r.file);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec))
    if (!keep.count(e.path().filename().string())) fs::remove_all(e.path(), ec);
}

// After a failed save (a full disk on some rank): removes the files of save `save` from
// `folder` (shards, texts, temporaries), and the folder when nothing else is in it,
// unless its index, committed already, names that save (then the save is complete).
void discard_save(const std::string& folder, const std::string& save) {
  std::error_code ec;
  const std::string index = folder + "/" + kIndexName;
  if (fs::exists(index, ec) && read_file_bounded(index, kMaxIndexBytes, "checkpoint index").find(save) != std::string::npos)
    return;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec))
    if (e.path().filename().string().find("." + save + ".") != std::string::npos) fs::remove(e.path(), ec);
  if (fs::is_empty(folder, ec)) fs::remove(folder, ec);
}

// Removes the oldest saves beyond keep_last (never `keep`, never a save of a later step
// than `keep`'s: a run restarted from an earlier step leaves what went further alone),
// saves that did not finish (folders without an index), and temporaries of single-file
// saves of killed processes.
void prune(const std::string& dir, int keep_last, const std::string& keep) {
  std::vector<std::pair<int64_t, std::string>> saves;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".step_", 0) == 0 && n.find(AtomicFile::kTempInfix) != std::string::npos) fs::remove(e.path(), ec);
    if (save_step(n) < 0 || n == keep) continue;
    if (e.is_directory(ec) && !fs::exists(e.path() / kIndexName, ec))
      fs::remove_all(e.path(), ec);
    else if (save_step(n) < save_step(keep))
      saves.push_back({save_step(n), n});
  }
  std::sort(saves.begin(), saves.end());
  const size_t others = keep_last > 0 ? size_t(keep_last - 1) : saves.size();  // `keep` is one of the kept
  for (size_t i = 0; i + others < saves.size(); ++i) {
    // Its index first: a folder without one is an unfinished save (removed above by the
    // next prune), so a kill inside remove_all never leaves one that looks complete.
    const fs::path p = fs::path(dir) / saves[i].second;
    if (fs::is_directory(p, ec)) fs::remove(p / kIndexName, ec);
    fs::remove_all(p, ec);
  }
}

}  // namespace

void check_checkpoint_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  VLM_REQUIRE(!ec && fs::is_directory(dir, ec), "--train.ckpt_dir ", dir, ": cannot create the checkpoint folder (",
              ec ? ec.message() : "not a folder", ")");
  VLM_REQUIRE(::access(dir.c_str(), W_OK | X_OK) == 0, "--train.ckpt_dir ", dir, ": cannot write there (",
              std::strerror(errno), ")");
}

SaveReport save_checkpoint(const std::string& dir, int keep_last, const CheckpointState& state,
                           const Config& options, const Tokenizer& tok, VlmModel& model,
                           const std::vector<bool>& trainable, AdamW& opt, Runtime& rt) {
  Stream& s = rt.backend().default_stream();
  s.synchronize();
  Communicator& world = rt.groups().world();
  const int rank = rt.topology().world_rank(), ranks = rt.topology().world_size();
  const std::string name = "step_" + std::to_string(state.step), folder = dir + "/" + name;
  const std::string save = all_gather_strings(world, s, rt.root() ? new_save_id() : "")[0];
  const std::vector<ModuleParams> mods = model.modules();
  for (const ModuleParams& m : mods)
    VLM_ASSERT(m.table->layout().sharding().size == rt.topology().dp(), module_name(m.id),
               ": its layout is not sharded over the DP group (VlmConfig::sharding)");
  const std::vector<StatePiece> pieces = written_pieces(mods, trainable);
  SaveReport rep;
  rep.path = folder, rep.shards = ranks;
  TextFile texts[3];
  std::string header;
  try {
    rt.on_every_rank("checkpoint " + folder, [&] {
      std::error_code ec;
      fs::create_directories(folder, ec);
      VLM_REQUIRE(!ec, folder, ": cannot create the checkpoint folder (", ec.message(), ")");
      if (rt.root()) {
        texts[0] = write_text(folder, "config." + save + ".ini", options.dump_ini());
        texts[1] = write_text(folder, "options." + save + ".ini", options.dump_ini(true));
        texts[2] = write_text(folder, "tokenizer." + save + ".json", tok.to_json());
      }
      header = write_shard(folder, {save, state.step, rank, ranks, {}}, pieces, mods, opt);
    });
    const std::vector<std::string> headers = all_gather_strings(world, s, header);
    rt.on_every_rank("checkpoint index " + folder, [&] {
      if (!rt.root()) return;
      const CheckpointIndex idx = build_index(save, state, texts[0], texts[1], texts[2], headers);
      write_file_atomic(folder + "/" + kIndexName, index_json(idx));
      sync_folder(folder);
      fault_tick(rank);
      write_file_atomic(dir + "/" + kLatestName, name + "\n");
      sync_folder(dir);
      clean_folder(folder, idx);
      prune(dir, keep_last, name);
      for (const ShardRef& r : idx.shards) {
        const int64_t data = r.bytes - kShardTrailerBytes - int64_t(headers[size_t(r.rank)].size());
        rep.total_bytes += data, rep.max_rank_bytes = std::max(rep.max_rank_bytes, data);
      }
    });
  } catch (...) {
    // A save that failed on any rank leaves nothing of itself (every rank has left its
    // writes when on_every_rank throws).
    if (rt.root()) discard_save(folder, save);
    throw;
  }
  return rep;
}

}  // namespace vlm

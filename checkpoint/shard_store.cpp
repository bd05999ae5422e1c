// Reading a sharded checkpoint (checkpoint/shard_store.h).
#include "checkpoint/shard_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/file_read.h"
#include "checkpoint/checkpoint_h5.h"
#include "io/crc32c.h"

namespace vlm {

static_assert(std::endian::native == std::endian::little, "shards hold little-endian f32");

namespace {

constexpr int64_t kChunkFloats = int64_t(4) << 20;  // 16 MiB per read

// "; it holds tensor /x" for the messages about a shard, when one is being read.
std::string holding(const std::string& tensor) { return tensor.empty() ? "" : "; it holds tensor /" + tensor; }

// An open file of the checkpoint, read with pread.
class ReadFile {
 public:
  ReadFile(const std::string& path, const std::string& tensor) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a named pipe: no wait for a writer
    VLM_REQUIRE(fd_ >= 0, path, ": cannot open (", std::strerror(errno), "); the checkpoint's index names it",
                holding(tensor));
  }
  ~ReadFile() { ::close(fd_); }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  int64_t size() const {
    struct stat st {};
    VLM_REQUIRE(::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode), path_, ": not a readable file");
    return int64_t(st.st_size);
  }
  void read(void* out, int64_t bytes, int64_t at, const std::string& tensor) const {
    char* p = static_cast<char*>(out);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, size_t(bytes), off_t(at));
      VLM_REQUIRE(n > 0, path_, ": cannot read tensor /", tensor, " (",
                  n == 0 ? "unexpected end of file" : std::strerror(errno), ")");
      p += n, bytes -= n, at += n;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

bool boxes_meet(const TensorRegion& a, const TensorRegion& b) {
  for (size_t i = 0; i < a.offset.size(); ++i)
    if (a.offset[i] >= b.offset[i] + b.extent[i] || b.offset[i] >= a.offset[i] + a.extent[i]) return false;
  return true;
}

std::string group_of(const std::string& tensor) {
  const size_t at = tensor.rfind('/');
  return at == std::string::npos ? "" : tensor.substr(0, at);
}

}  // namespace

ShardStore::ShardStore(const std::string& dir) {
  path_ = dir;
  const std::string ip = index_path();
  idx_ = parse_index(read_file_bounded(ip, uint64_t(kMaxIndexBytes), "checkpoint index"), ip);
  for (size_t i = 0; i < idx_.tensors.size(); ++i) by_name_[idx_.tensors[i].name] = i;
  checked_.assign(idx_.shards.size(), false);
  auto text = [&](const TextFile& t, uint64_t limit, const char* kind) {
    const std::string p = dir + "/" + t.file;
    VLM_REQUIRE(uint64_t(t.bytes) <= limit, ip, ": texts: ", t.file, " of ", t.bytes, " bytes (at most ", limit, ")");
    std::string s = read_file_bounded(p, limit, kind);
    VLM_REQUIRE(int64_t(s.size()) == t.bytes && crc32c(s.data(), s.size()) == t.crc32c, p, ": holds ", s.size(),
                " bytes that do not match the index's ", t.bytes, " bytes and checksum (from another save?)");
    return s;
  };
  meta_.state = idx_.state;
  meta_.config = text(idx_.config, kMaxIniBytes, "run config");
  meta_.options = text(idx_.options, kMaxIniBytes, "run options");
  meta_.tokenizer = text(idx_.tokenizer, uint64_t(kMaxTokenizerBytes), "tokenizer");
}

std::string ShardStore::index_path() const { return path_ + "/" + kIndexName; }

std::vector<std::string> ShardStore::tensors(const std::vector<std::string>&) const {
  std::vector<std::string> all;
  for (const IndexTensor& t : idx_.tensors) all.push_back(t.name);
  return all;
}

std::vector<std::string> ShardStore::members(const std::string& group) const {
  std::vector<std::string> m;
  for (const IndexTensor& t : idx_.tensors)
    if (group_of(t.name) == group) m.push_back(t.name.substr(group.size() + 1));
  std::sort(m.begin(), m.end());
  return m;
}

int64_t ShardStore::data_bytes() const {
  int64_t n = 0;
  for (const IndexTensor& t : idx_.tensors)
    for (const IndexPiece& p : t.pieces) n += p.bytes();
  return n;
}

const IndexTensor& ShardStore::find(const std::string& tensor, const Dims& shape) const {
  const auto it = by_name_.find(tensor);
  VLM_REQUIRE(it != by_name_.end(), index_path(), ": tensor /", tensor,
              " is missing (saved from another model configuration?)");
  const IndexTensor& t = idx_.tensors[it->second];
  VLM_REQUIRE(t.shape == shape, index_path(), ": tensor /", tensor, " has shape ", dims_str(t.shape),
              ", the model expects ", dims_str(shape), " (saved from another model configuration?)");
  return t;
}

void ShardStore::check_shard(int k, const std::string& tensor) {
  if (checked_[size_t(k)]) return;
  const ShardRef& r = idx_.shards[size_t(k)];
  const std::string path = path_ + "/" + r.file;
  const ReadFile f(path, tensor);
  const int64_t size = f.size();
  VLM_REQUIRE(size == r.bytes, path, ": holds ", size, " bytes, the index says ", r.bytes,
              " (truncated, or from another save?)", holding(tensor));
  std::string trailer(size_t(kShardTrailerBytes), '\0');
  f.read(trailer.data(), kShardTrailerBytes, size - kShardTrailerBytes, tensor);
  const int64_t n = shard_header_length(trailer, size, path);
  std::string text(size_t(n), '\0');
  f.read(text.data(), n, size - kShardTrailerBytes - n, tensor);
  VLM_REQUIRE(crc32c(text.data(), text.size()) == r.header_crc32c, path,
              ": its header does not match the index's checksum (from another save?)", holding(tensor));
  const ShardHeader h = parse_shard_header(text, path, size - kShardTrailerBytes - n);
  VLM_REQUIRE(h.save == idx_.save && h.rank == r.rank, path, ": written by rank ", h.rank, " of save ", h.save,
              ", the index expects rank ", r.rank, " of save ", idx_.save);
  // Its pieces are the index's pieces of this shard, byte for byte in the same places.
  std::vector<std::pair<int64_t, const IndexTensor*>> mine;
  std::vector<const IndexPiece*> pieces;
  for (const IndexTensor& t : idx_.tensors)
    for (const IndexPiece& p : t.pieces)
      if (p.shard == k) mine.push_back({p.at, &t}), pieces.push_back(&p);
  std::vector<size_t> order(mine.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return mine[a].first < mine[b].first; });
  VLM_REQUIRE(order.size() == h.pieces.size(), path, ": holds ", h.pieces.size(), " pieces, the index names ",
              order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const ShardPiece& s = h.pieces[i];
    const IndexPiece& p = *pieces[order[i]];
    const IndexTensor& t = *mine[order[i]].second;
    const char* differs = s.tensor != t.name   ? "tensor"
                          : s.shape != t.shape ? "shape"
                          : s.region != p.region ? "region"
                          : s.at != p.at       ? "byte offset"
                          : s.crc32c != p.crc32c ? "checksum"
                                                 : nullptr;
    VLM_REQUIRE(!differs, path, ": its piece at byte ", s.at, " (tensor /", s.tensor, ") differs in its ", differs,
                " from the index's piece there (tensor /", t.name,
                s.crc32c != p.crc32c ? cat(": checksum ", s.crc32c, " in the shard, ", p.crc32c, " in the index") : "",
                ")");
  }
  checked_[size_t(k)] = true;
}

void ShardStore::check_shards() {
  for (size_t k = 0; k < idx_.shards.size(); ++k) check_shard(int(k), "");
}

void ShardStore::read_piece(const IndexTensor& t, const IndexPiece& p, const std::vector<Overlap>& ov, float* dst) {
  check_shard(p.shard, t.name);
  const std::string path = path_ + "/" + idx_.shards[size_t(p.shard)].file;
  const ReadFile f(path, t.name);
  const int64_t n = p.region.numel();
  std::vector<float> buf(size_t(std::min(n, kChunkFloats)));
  uint32_t crc = 0;
  size_t next = 0;  // the first overlap not wholly copied yet (ov is in piece order)
  for (int64_t at = 0; at < n; at += kChunkFloats) {
    const int64_t len = std::min(kChunkFloats, n - at);
    f.read(buf.data(), len * 4, p.at + at * 4, t.name);
    crc = crc32c(buf.data(), size_t(len) * 4, crc);
    for (int64_t i = 0; i < len; ++i)
      VLM_REQUIRE(std::isfinite(buf[size_t(i)]), path, ": tensor /", t.name, " holds a non-finite value");
    for (size_t k = next; k < ov.size() && ov[k].a < at + len; ++k) {
      const int64_t lo = std::max(ov[k].a, at), hi = std::min(ov[k].a + ov[k].len, at + len);
      std::memcpy(dst + ov[k].b + (lo - ov[k].a), buf.data() + (lo - at), size_t(hi - lo) * 4);
      if (ov[k].a + ov[k].len <= at + len) next = k + 1;
    }
  }
  bytes_read_ += uint64_t(n) * 4;
  VLM_REQUIRE(crc == p.crc32c, path, ": tensor /", t.name, " is corrupt (the checksum of its piece at byte ", p.at,
              " does not match the data)");
}

void ShardStore::read(const std::string& tensor, const Dims& shape, const TensorRegion& need, float* dst) {
  const IndexTensor& t = find(tensor, shape);
  VLM_ASSERT(region_problem(shape, need).empty(), "read of ", tensor, ": ", region_problem(shape, need));
  if (need.numel() == 0) return;
  const std::vector<TensorRun> want = region_runs(shape, need);
  // The pieces that hold some of `need`, and where: together they must tile it exactly.
  std::vector<std::pair<const IndexPiece*, std::vector<Overlap>>> reads;
  std::vector<std::pair<int64_t, int64_t>> tiles;  // (position in need, length)
  for (const IndexPiece& p : t.pieces) {
    if (!boxes_meet(p.region, need)) continue;
    std::vector<Overlap> ov = overlaps(region_runs(shape, p.region), want);
    if (ov.empty()) continue;
    for (const Overlap& o : ov) tiles.push_back({o.b, o.len});
    reads.push_back({&p, std::move(ov)});
  }
  std::sort(tiles.begin(), tiles.end());
  int64_t at = 0;
  for (const auto& [b, len] : tiles) {
    VLM_REQUIRE(b >= at, index_path(), ": tensor /", tensor, ": two of its pieces hold the same elements");
    VLM_REQUIRE(b == at, index_path(), ": tensor /", tensor, ": no piece holds element ", at, " of ", region_str(need));
    at += len;
  }
  VLM_REQUIRE(at == need.numel(), index_path(), ": tensor /", tensor, ": no piece holds element ", at, " of ",
              region_str(need));
  for (const auto& [p, ov] : reads) read_piece(t, *p, ov, dst);
}

}  // namespace vlm

// IDX reading, plain or gzip-compressed: a gzip file is inflated member by member with
// zlib's inflate (as `gzip -t`, bytes after the last member are refused; zlib's gz* API
// would skip them silently); the declared size is bounded (2^32 bytes, allocatable) and
// the data grows as it is read.
#include "data/convert/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "base/file_read.h"
#include "base/memory_check.h"

namespace vlm {

namespace {

// The bytes of an IDX file: the file's own, or, when it starts with gzip's magic, those
// of its gzip members.
class IdxSource {
  static constexpr const char* kTrailing = ": bytes after the end of its gzip data that are no whole gzip member";

 public:
  explicit IdxSource(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb"), &std::fclose) {
    VLM_REQUIRE(f_ != nullptr, path, ": cannot open IDX file");
    fill();
    gz_ = z_.avail_in >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gz_) VLM_REQUIRE(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, path, ": cannot start zlib");
  }
  ~IdxSource() {
    if (gz_) inflateEnd(&z_);
  }
  IdxSource(const IdxSource&) = delete;
  IdxSource& operator=(const IdxSource&) = delete;

  // Up to n bytes into dst; fewer only at the end of the data.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < n) {
      if (z_.avail_in == 0) fill();
      if (!gz_) {
        if (z_.avail_in == 0) break;
        const size_t k = std::min<size_t>(n - got, z_.avail_in);
        std::copy_n(z_.next_in, k, out + got);
        z_.next_in += k, z_.avail_in -= unsigned(k), got += k;
        continue;
      }
      if (member_done_) {  // another member, or the end of the file
        if (z_.avail_in == 0) break;
        VLM_REQUIRE(inflateReset(&z_) == Z_OK, path_, ": cannot restart zlib");
        member_done_ = false, after_member_ = true;
      }
      VLM_REQUIRE(z_.avail_in > 0 || !after_member_, path_, kTrailing);
      VLM_REQUIRE(z_.avail_in > 0, path_, ": IDX file is truncated or corrupt (its gzip data ends inside a member)");
      const unsigned k = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
      z_.next_out = out + got, z_.avail_out = k;
      const int r = inflate(&z_, Z_NO_FLUSH);
      got += k - z_.avail_out;
      if (r == Z_STREAM_END) {
        member_done_ = true, after_member_ = false;
        continue;
      }
      VLM_REQUIRE(r == Z_OK || r == Z_BUF_ERROR || !after_member_, path_, kTrailing);
      VLM_REQUIRE(r == Z_OK || r == Z_BUF_ERROR, path_, ": IDX file is truncated or corrupt (gzip: ",
                  z_.msg ? z_.msg : "bad data", ")");
      if (z_.avail_out < k) after_member_ = false;
    }
    return got;
  }

 private:
  void fill() {
    in_.resize(size_t(1) << 20);
    const size_t k = std::fread(in_.data(), 1, in_.size(), f_.get());
    VLM_REQUIRE(k > 0 || !std::ferror(f_.get()), path_, ": cannot read IDX file");
    z_.next_in = in_.data(), z_.avail_in = unsigned(k);
  }

  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
  std::vector<unsigned char> in_;
  z_stream z_{};
  bool gz_ = false;
  bool member_done_ = false;   // the current gzip member has ended
  bool after_member_ = false;  // no byte of the member begun after one has come out yet
};

void read_exact(IdxSource& src, void* dst, size_t n, const std::string& path) {
  const size_t got = src.read(dst, n);
  VLM_REQUIRE(got == n, path, ": IDX file is truncated or corrupt (wanted ", n, " bytes, got ", got, ")");
}

}  // namespace

IdxArray read_idx(const std::string& path, int64_t max_items) {
  require_regular_if_present(path, "an IDX file");  // a named pipe would block the open
  IdxSource src(path);
  uint8_t head[4];
  read_exact(src, head, 4, path);
  VLM_REQUIRE(head[0] == 0 && head[1] == 0 && head[2] == 0x08 && head[3] >= 1 && head[3] <= 4, path,
              ": not an unsigned-byte IDX file (magic ", int(head[2]), "/", int(head[3]), ")");
  IdxArray a;
  uint64_t total = 1;
  for (int d = 0; d < head[3]; ++d) {
    uint8_t b[4];
    read_exact(src, b, 4, path);
    const int64_t v = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | b[3];
    VLM_REQUIRE(v >= 1 && v <= (int64_t(1) << 24), path, ": IDX dimension ", d, " = ", v, " is implausible");
    a.dims.push_back(v);
  }
  const bool cut = max_items > 0 && max_items < a.dims[0];
  if (cut) a.dims[0] = max_items;
  for (int64_t v : a.dims) total = mul_sat(total, uint64_t(v));
  VLM_REQUIRE(total <= (uint64_t(1) << 32), path, ": IDX data of ", total, " bytes is implausible");
  require_allocatable(total, cat(path, ": IDX data"));
  // Grown as the bytes arrive, so a header that promises more than the file holds fails
  // as "truncated" after reading what is there, not by allocating the promise first.
  constexpr size_t kStep = size_t(16) << 20;
  while (a.data.size() < size_t(total)) {
    const size_t have = a.data.size(), n = std::min(kStep, size_t(total) - have);
    a.data.resize(have + n);
    read_exact(src, a.data.data() + have, n, path);
  }
  // A whole file holds exactly what its header declares: more means the header is not
  // this data's (the images' header on the labels, a damaged header).
  char more = 0;
  VLM_REQUIRE(cut || src.read(&more, 1) == 0, path, ": more data than the ", total,
              " bytes the IDX header declares");
  return a;
}

}  // namespace vlm

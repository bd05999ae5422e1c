// IDX reading through zlib's gz* API, which reads gzip and plain files alike; the
// declared size is bounded (2^32 bytes, allocatable) and the data grows as it is read.
#include "data/convert/idx.h"

#include <zlib.h>

#include <algorithm>

#include "base/error.h"
#include "base/file_read.h"
#include "base/memory_check.h"

namespace vlm {

namespace {
struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};
void read_exact(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    const int r = gzread(f, static_cast<char*>(dst) + got, chunk);
    VLM_REQUIRE(r > 0, path, ": IDX file is truncated or corrupt (wanted ", n, " bytes, got ", got, ")");
    got += size_t(r);
  }
}
}  // namespace

IdxArray read_idx(const std::string& path, int64_t max_items) {
  require_regular_if_present(path, "an IDX file");  // a named pipe would block gzopen
  GzFile g;
  g.f = gzopen(path.c_str(), "rb");
  VLM_REQUIRE(g.f != nullptr, path, ": cannot open IDX file");
  uint8_t head[4];
  read_exact(g.f, head, 4, path);
  VLM_REQUIRE(head[0] == 0 && head[1] == 0 && head[2] == 0x08 && head[3] >= 1 && head[3] <= 4, path,
              ": not an unsigned-byte IDX file (magic ", int(head[2]), "/", int(head[3]), ")");
  IdxArray a;
  uint64_t total = 1;
  for (int d = 0; d < head[3]; ++d) {
    uint8_t b[4];
    read_exact(g.f, b, 4, path);
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
    read_exact(g.f, a.data.data() + have, n, path);
  }
  // A whole file holds exactly what its header declares: more means the header is not
  // this data's (the images' header on the labels, a damaged header).
  char more = 0;
  VLM_REQUIRE(cut || gzread(g.f, &more, 1) <= 0, path, ": more data than the ", total,
              " bytes the IDX header declares");
  return a;
}

}  // namespace vlm

// IDX reading through zlib's gz* API, which reads gzip and plain files alike.
#include "data/convert/idx.h"

#include <zlib.h>

#include <algorithm>

#include "core/error.h"

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
  GzFile g;
  g.f = gzopen(path.c_str(), "rb");
  VLM_REQUIRE(g.f != nullptr, path, ": cannot open IDX file");
  uint8_t head[4];
  read_exact(g.f, head, 4, path);
  VLM_REQUIRE(head[0] == 0 && head[1] == 0 && head[2] == 0x08 && head[3] >= 1 && head[3] <= 4, path,
              ": not an unsigned-byte IDX file (magic ", int(head[2]), "/", int(head[3]), ")");
  IdxArray a;
  int64_t total = 1;
  for (int d = 0; d < head[3]; ++d) {
    uint8_t b[4];
    read_exact(g.f, b, 4, path);
    const int64_t v = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | b[3];
    VLM_REQUIRE(v >= 1 && v <= (int64_t(1) << 24), path, ": IDX dimension ", d, " = ", v, " is implausible");
    a.dims.push_back(v);
  }
  if (max_items > 0) a.dims[0] = std::min(a.dims[0], max_items);
  for (int64_t v : a.dims) total *= v;
  VLM_REQUIRE(total <= (int64_t(1) << 32), path, ": IDX data of ", total, " bytes is implausible");
  a.data.resize(size_t(total));
  read_exact(g.f, a.data.data(), a.data.size(), path);
  return a;
}

}  // namespace vlm

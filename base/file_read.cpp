// Implementation of read_file_bounded (see file_read.h).
#include "base/file_read.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/memory_check.h"

namespace vlm {

namespace {
constexpr int kPipeWaitMs = 5000;
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::string read_file_bounded(const std::string& path, uint64_t max_bytes, std::string_view kind) {
  Fd f;
  // A named pipe (not the pipes of <(...) or /dev/stdin, which are links) is opened
  // without waiting for a writer and given kPipeWaitMs for one to write; reads block below.
  struct stat link {};
  const bool named_pipe = ::lstat(path.c_str(), &link) == 0 && S_ISFIFO(link.st_mode);
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw UserError(cat(path, ": cannot open ", kind, " (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw UserError(cat(path, ": cannot stat ", kind, " (", std::strerror(errno), ")"));
  const bool vowel = !kind.empty() && std::string_view("aeiou").find(kind[0]) != std::string_view::npos;
  if (S_ISDIR(st.st_mode)) throw UserError(cat(path, ": is a directory (expected ", vowel ? "an " : "a ", kind, ")"));
  if (named_pipe) {
    pollfd p{f.fd, POLLIN, 0};
    int r = ::poll(&p, 1, kPipeWaitMs);
    while (r < 0 && errno == EINTR) r = ::poll(&p, 1, kPipeWaitMs);
    if (r == 0)
      throw UserError(cat(path, ": ", kind, " is a named pipe that no program wrote to within ", kPipeWaitMs / 1000,
                          " s"));
  }
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw UserError(cat(path, ": cannot read ", kind, " (", std::strerror(errno), ")"));
  const bool regular = S_ISREG(st.st_mode);
  // A device or pipe has no size to check first: it is read up to a smaller limit.
  if (!regular) max_bytes = std::min(max_bytes, kStreamLimit);
  if (regular && uint64_t(st.st_size) > max_bytes)
    throw UserError(cat(path, ": ", kind, " of ", uint64_t(st.st_size), " bytes is larger than the limit of ",
                        max_bytes, " bytes"));
  const uint64_t expect = regular ? uint64_t(st.st_size) : std::min<uint64_t>(max_bytes, uint64_t(1) << 20);
  require_allocatable(expect, cat(path, ": reading the ", kind));
  std::string out;
  out.resize(size_t(expect));
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (regular || have > max_bytes) break;
      // A device or pipe: grow up to the limit, one byte past it to detect "larger".
      const uint64_t next = std::min<uint64_t>(max_bytes + 1, std::max<uint64_t>(2 * out.size(), 4096));
      if (next <= out.size()) break;
      require_allocatable(next, cat(path, ": reading the ", kind));
      out.resize(size_t(next));
    }
    const ssize_t r = ::read(f.fd, out.data() + have, out.size() - have);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw UserError(cat(path, ": read of the ", kind, " failed (", std::strerror(errno), ")"));
    if (r == 0) break;
    have += size_t(r);
  }
  if (have > max_bytes)
    throw UserError(cat(path, ": ", kind, " is larger than the limit of ", max_bytes, " bytes",
                        regular ? "" : " (of a pipe or device; give a regular file)"));
  if (have == 0 && S_ISFIFO(st.st_mode))
    throw UserError(cat(path, ": ", kind, " is a pipe that gave no bytes"));
  out.resize(have);  // a regular file that shrank while read: what is there
  return out;
}

void require_regular_if_present(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if (!S_ISREG(st.st_mode)) throw UserError(cat(path, ": not a regular file (expected ", what, ")"));
}

}  // namespace vlm

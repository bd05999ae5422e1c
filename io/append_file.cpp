// AppendFile (io/append_file.h).
#include "io/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace vlm {

AppendFile::AppendFile(std::string path, bool truncate) : path_(std::move(path)) {
  struct stat st {};
  created_ = ::stat(path_.c_str(), &st) != 0 || truncate;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0666);
  VLM_REQUIRE(fd_ >= 0, path_, ": cannot open for writing (", std::strerror(errno), ")");
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) {
    const int e = errno;
    ::close(fd_);
    throw UserError(cat(path_, ": cannot open for writing (", std::strerror(e), ")"));
  }
  size_ = uint64_t(end);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view bytes) {
  VLM_REQUIRE(fd_ >= 0, path_, ": an earlier write failed");
  if (bytes.empty()) return;
  // pwrite at the known end: the piece lands where the truncation below undoes it.
  const char* p = bytes.data();
  size_t left = bytes.size();
  uint64_t at = size_;
  while (left > 0) {
    const ssize_t w = ::pwrite(fd_, p, left, off_t(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w == 0 ? EIO : errno;
      const bool undone = ::ftruncate(fd_, off_t(size_)) == 0;
      ::close(fd_);
      fd_ = -1;
      if (created_ && !written_) ::unlink(path_.c_str());
      throw UserError(cat(path_, ": write failed (", std::strerror(e), ")",
                          undone ? "" : "; the file may end with a partial piece"));
    }
    p += w, left -= size_t(w), at += uint64_t(w);
  }
  size_ = at;
  written_ = true;
}

}  // namespace vlm

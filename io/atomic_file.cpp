// Implementation of AtomicFile and write_file_atomic (see atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"

namespace vlm {

namespace fs = std::filesystem;

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  VLM_REQUIRE(!path_.empty(), "an output file name is required");
  const fs::path p(path_);
  std::error_code ec;
  VLM_REQUIRE(!fs::is_directory(p, ec), path_, ": is a directory (expected an output file name)");
  VLM_REQUIRE(p.has_filename(), path_, ": expected an output file name, not a folder");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  VLM_REQUIRE(fs::is_directory(dir, ec), path_, ": cannot write, the folder ", dir.string(), " does not exist");
  static std::atomic<int> counter{0};
  temp_ = (p.parent_path() / cat(".", p.filename().string(), kTempInfix, getpid(), "-", counter++)).string();
}

std::string AtomicFile::final_path_of(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  const size_t at = name.rfind(kTempInfix);
  if (name.empty() || name[0] != '.' || at == std::string::npos || at < 2) return path;
  return (p.parent_path() / name.substr(1, at - 1)).string();
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), temp_(std::move(o.temp_)), committed_(o.committed_) {
  o.committed_ = true;  // the moved-from object owns no temporary file
}

AtomicFile::~AtomicFile() {
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::commit() {
  VLM_ASSERT(!committed_, "AtomicFile::commit twice for ", path_);
  committed_ = true;  // from here on the temporary file is removed or renamed, once
  const int fd = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int sync_errno = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    ::unlink(temp_.c_str());
    throw UserError(cat(path_, ": cannot write (", std::strerror(sync_errno), ")"));
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp_.c_str());
    throw UserError(cat(path_, ": cannot replace it with the new file (", std::strerror(e), ")"));
  }
}

void check_output_path(const std::string& path) { AtomicFile probe(path); }

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile out(path);
  std::FILE* f = std::fopen(out.temp_path().c_str(), "wb");
  VLM_REQUIRE(f, path, ": cannot write (", std::strerror(errno), ")");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int e = errno;
  const bool closed = std::fclose(f) == 0;
  VLM_REQUIRE(ok && closed, path, ": write failed (", std::strerror(ok ? errno : e), ")");
  out.commit();
}

void sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  VLM_REQUIRE(fd >= 0, dir, ": cannot open the folder (", std::strerror(errno), ")");
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP;
  const int e = errno;
  ::close(fd);
  VLM_REQUIRE(ok, dir, ": cannot flush the folder to disk (", std::strerror(e), ")");
}

}  // namespace vlm

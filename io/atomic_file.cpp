// Implementation of AtomicFile and write_file_atomic (see atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "base/config.h"
#include "base/error.h"

namespace vlm {

namespace fs = std::filesystem;

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  VLM_REQUIRE(!path_.empty(), "an output file name is required");
  const fs::path p(path_);
  std::error_code ec;
  VLM_REQUIRE(!fs::is_directory(p, ec), path_, ": is a directory (expected an output file name)");
  // The rename would replace a device, FIFO or socket with a regular file.
  VLM_REQUIRE(!fs::exists(p, ec) || fs::is_regular_file(p, ec), path_,
              ": exists and is not a regular file (a device, FIFO or socket); give the path of a file");
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
    : path_(std::move(o.path_)), temp_(std::move(o.temp_)), fd_(std::exchange(o.fd_, -1)), committed_(o.committed_) {
  o.committed_ = true;  // the moved-from object owns no temporary file
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

namespace {

// Writes all n bytes (retrying short writes and EINTR); false with errno set on failure.
bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;  // no progress and no error: do not spin
      return false;
    }
    p += w, n -= size_t(w);
  }
  return true;
}

}  // namespace

void AtomicFile::fail(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  committed_ = true;  // nothing left to remove or rename
  ::unlink(temp_.c_str());
  throw UserError(cat(path_, ": ", what, " (", std::strerror(err), ")"));
}

void AtomicFile::write(std::string_view bytes) {
  VLM_ASSERT(!committed_, "AtomicFile::write after commit for ", path_);
  if (fd_ < 0) {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) fail("cannot write", errno);
  }
  if (!write_all(fd_, bytes.data(), bytes.size())) fail("write failed", errno);
}

void AtomicFile::commit() {
  VLM_ASSERT(!committed_, "AtomicFile::commit twice for ", path_);
  // The file write() filled, or the one a library wrote under temp_path() (then opened
  // here only to flush it).
  const int fd = fd_ >= 0 ? std::exchange(fd_, -1) : ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("write failed", errno);
  const bool synced = ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;  // NFS and others report write errors here
  if (!synced || !closed) fail("write failed", synced ? errno : sync_errno);
  committed_ = true;  // from here on the temporary file is renamed or removed, once
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp_.c_str());
    throw UserError(cat(path_, ": cannot replace it with the new file (", std::strerror(e), ")"));
  }
}

bool path_inside(const std::string& path, const std::string& folder) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const fs::path dir = fs::weakly_canonical(fs::absolute(folder, ec), ec);
  const fs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

void check_output_path(const std::string& path, const std::vector<InputPath>& inputs) {
  AtomicFile probe(path);
  std::error_code ec;
  for (const InputPath& in : inputs) {
    if (in.path.empty()) continue;
    if (fs::equivalent(path, in.path, ec))
      throw UserError(cat(path, ": the output is the input of ", in.option, "; write to another file"));
    if (fs::is_directory(in.path, ec) && path_inside(path, in.path))
      throw UserError(cat(path, ": inside ", in.path, ", the folder of ", in.option, "; write outside it"));
  }
}

void check_output_path(const std::string& path, const Config& cfg, std::vector<InputPath> inputs) {
  for (const std::string& f : cfg.files()) inputs.push_back({"--config", f});
  check_output_path(path, inputs);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile out(path);
  out.write(bytes);
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

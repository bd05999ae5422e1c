// AppendFile: a file that only grows and is read while it grows (metrics.jsonl, the
// TensorBoard event files of runlog/), so it is written in place, not through an
// AtomicFile (io/atomic_file.h). It keeps the promise of the other writers in its own
// way (docs/errors.md, "A full disk"):
//  - append() writes one whole piece (a JSON line, a batch of whole records) or none of
//    it: a write that fails (a full disk, a quota, a file size limit) is undone by
//    truncating the file back to its size before the piece, and is a UserError
//    "<path>: write failed (<strerror>)". So the file holds exactly the pieces appended
//    before, byte for byte, never a partial one.
//  - A file it created (or emptied: `truncate`) and that never received a whole piece is
//    removed on failure, so a failed run leaves no empty file behind.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace vlm {

class AppendFile {
 public:
  // Opens `path` for appending (created when absent; emptied first when `truncate`).
  // UserError naming it when it cannot be opened.
  AppendFile(std::string path, bool truncate);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view bytes);
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // bytes in the file: the whole pieces

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool created_ = false, written_ = false;
};

}  // namespace vlm

// AtomicFile: every file the project writes (datasets, tokenizers, logits, checkpoints,
// tables) is written under a temporary name in the folder of its final name and renamed
// over it only when complete, so a command that fails (or is killed) never truncates
// or half-writes an existing file: readers see the old file or the new one, whole.
//   AtomicFile out(path);            // checks the folder; picks ".<name>.tmp-<pid>-<n>"
//   out.write(bytes) ...;            // or a library (HDF5) writes to out.temp_path()
//   out.commit();                    // fsync, then rename(temp, path)
// Destroying an AtomicFile that was not committed removes the temporary file. A process
// killed with SIGKILL may leave one behind (its name starts with '.' and says tmp).
// Errors (docs/errors.md, "A full disk"): a write, fsync or rename that fails (a full
// disk, a quota, a file size limit) is a UserError "<path>: write failed (<strerror>)"
// naming the final path; the temporary file is removed and `path` keeps its old bytes.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace vlm {

class Config;

class AtomicFile {
 public:
  // UserError naming `path` when its folder does not exist, or `path` is a directory or
  // another file that is not a regular one (a device such as /dev/null, a FIFO).
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  bool committed() const { return committed_; }
  // Appends `bytes` to the temporary file (created by the first call), all of them or a
  // UserError naming path() and the error.
  void write(std::string_view bytes);
  // Flushes the temporary file to disk and renames it over path(); UserError on failure
  // (the temporary file is then removed).
  void commit();
  // The final path of a temporary path made by an AtomicFile, else `path` itself (so
  // that messages of the writers name the file the user asked for).
  static std::string final_path_of(const std::string& path);
  static constexpr const char* kTempInfix = ".tmp-";

 private:
  [[noreturn]] void fail(const char* what, int err);  // removes the temporary, throws
  std::string path_, temp_;
  int fd_ = -1;  // the temporary file, while write() has it open
  bool committed_ = false;
};

// The checks of AtomicFile's constructor without creating anything: a command calls it
// on its output paths before long work, so a bad path fails first. An output that is
// one of the command's input files (the same file by any path: `inputs` pairs an
// option's name with its path), or inside an input folder (a checkpoint, a Hugging Face
// model), is refused too: the rename would destroy or change that input.
struct InputPath {
  std::string option;  // "--data.input"
  std::string path;
};
void check_output_path(const std::string& path, const std::vector<InputPath>& inputs = {});
// Whether `path` (existing or not) lies inside the folder `folder`, compared by their
// canonical forms (links and `..` resolved).
bool path_inside(const std::string& path, const std::string& folder);
// The same with every INI file the command read (cfg.files(): --config) as an input too.
void check_output_path(const std::string& path, const Config& cfg, std::vector<InputPath> inputs);

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Flushes a folder's entries to disk (fsync of the folder), so that the renames of the
// AtomicFiles committed in it are durable before what depends on them is written (a
// checkpoint's index after its shards). A file system that cannot sync folders is left
// as it is; another failure is a UserError naming the folder.
void sync_folder(const std::string& dir);

}  // namespace vlm

// Files of the tests: fresh scratch folders (unique per process and name, under the
// system temp dir), whole-file read/write, and a fixture with a folder per test.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

namespace vlm::test {

// A fresh empty folder <tmp>/vlm_test_<pid>_<name> (removed first if it exists).
std::string scratch_dir(const std::string& name);
// The bytes of a file (throws std::runtime_error when it cannot be read).
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);
// `bytes` as one gzip member (zlib's deflate), as `gzip -c` writes them.
std::string gzip(const std::string& bytes);

// Runs `cmd` through the shell, its stdout and stderr captured in <dir>/stdout.txt and
// <dir>/stderr.txt; status is the exit status (-1 when it did not exit normally).
struct CommandResult {
  int status = -1;
  std::string out, err;
};
CommandResult run_command(const std::string& cmd, const std::string& dir);

// What `f` (and any thread it runs) writes to this process's stderr (file descriptor 2,
// redirected into a scratch file meanwhile): a library's message, which no caller sees.
std::string stderr_of(const std::function<void()>& f);

// A fresh folder per test (named after the test), removed after it.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Writes `text` to <dir>/<name> and returns the path.
  std::string write(const std::string& name, const std::string& text);
  std::filesystem::path dir_;
};

}  // namespace vlm::test

// Tests of AtomicFile (io/atomic_file.h): the final file appears only on commit and
// replaces the old one whole; without commit the old file stays and no temporary file is
// left; bad output paths are refused before anything is created; a write that fails (a
// file size limit here, as a full disk: tests/robustness/test_disk_full.cpp has the real
// one) names the file and the error and leaves the old file. And of AppendFile
// (io/append_file.h): whole pieces appended, a failing one truncated away, a file it
// created and never filled removed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "io/append_file.h"
#include "io/atomic_file.h"
#include "tests/support/errors.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// RLIMIT_FSIZE of this process while alive (SIGXFSZ ignored: the write fails with EFBIG,
// "File too large", as it fails with ENOSPC on a full disk).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit r{bytes, old_.rlim_max};
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vlm_atomic_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "out.bin") << "old";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitReplacesTheFile) {
  const std::string path = (dir_ / "out.bin").string();
  {
    AtomicFile f(path);
    EXPECT_EQ(fs::path(f.temp_path()).parent_path(), dir_);  // same folder: rename is atomic
    EXPECT_NE(f.temp_path(), path);
    std::ofstream(f.temp_path()) << "new contents";
    EXPECT_EQ(slurp(path), "old");  // untouched until commit
    f.commit();
    EXPECT_TRUE(f.committed());
  }
  EXPECT_EQ(slurp(path), "new contents");
  EXPECT_EQ(files_in(dir_), 1u);
}

TEST_F(AtomicFileTest, NoCommitKeepsTheOldFileAndRemovesTheTemporary) {
  const std::string path = (dir_ / "out.bin").string();
  {
    AtomicFile f(path);
    std::ofstream(f.temp_path()) << "half writ";
    EXPECT_EQ(files_in(dir_), 2u);
  }  // e.g. an exception unwinding past the writer
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(files_in(dir_), 1u);
}

TEST_F(AtomicFileTest, WriteFileAtomicAndFinalPath) {
  const std::string path = (dir_ / "t.json").string();
  write_file_atomic(path, "{}");
  EXPECT_EQ(slurp(path), "{}");
  AtomicFile f(path);
  EXPECT_EQ(AtomicFile::final_path_of(f.temp_path()), path);
  EXPECT_EQ(AtomicFile::final_path_of("plain.h5"), "plain.h5");
  EXPECT_EQ(AtomicFile::final_path_of("dir/.x.h5.tmp-12-0"), "dir/x.h5");
}

TEST_F(AtomicFileTest, WriteGoesToTheTemporaryUntilCommit) {
  const std::string path = (dir_ / "out.bin").string();
  AtomicFile f(path);
  f.write("new ");
  f.write(std::string("con\0tents", 9));
  EXPECT_EQ(slurp(f.temp_path()), std::string("new con\0tents", 13));
  EXPECT_EQ(slurp(path), "old");
  f.commit();
  EXPECT_EQ(slurp(path), std::string("new con\0tents", 13));
  EXPECT_EQ(files_in(dir_), 1u);
}

TEST_F(AtomicFileTest, FailingWriteNamesTheFileAndTheErrorAndKeepsTheOldFile) {
  const std::string path = (dir_ / "out.bin").string();
  std::string msg;
  {
    FileSizeLimit limit(100);
    AtomicFile f(path);
    f.write(std::string(60, 'a'));
    msg = test::error_of([&] { f.write(std::string(60, 'b')); });
    EXPECT_EQ(files_in(dir_), 1u);  // the temporary is gone at once
  }
  EXPECT_EQ(msg, path + ": write failed (File too large)");
  EXPECT_EQ(slurp(path), "old");
  {
    FileSizeLimit limit(100);
    msg = test::error_of([&] { write_file_atomic(path, std::string(200, 'c')); });
  }
  EXPECT_EQ(msg, path + ": write failed (File too large)");
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(files_in(dir_), 1u);
}

TEST_F(AtomicFileTest, AppendFileAppendsWholePieces) {
  const std::string path = (dir_ / "out.bin").string();
  {
    AppendFile a(path, false);  // keeps "old"
    EXPECT_EQ(a.size(), 3u);
    a.append("+1\n");
    a.append("");
    a.append("+2\n");
    EXPECT_EQ(a.size(), 9u);
  }
  EXPECT_EQ(slurp(path), "old+1\n+2\n");
  {
    AppendFile a(path, true);  // emptied
    a.append("x");
  }
  EXPECT_EQ(slurp(path), "x");
}

TEST_F(AtomicFileTest, AppendFileUndoesAFailingPiece) {
  const std::string path = (dir_ / "out.bin").string();  // "old"
  AppendFile a(path, false);
  std::string msg;
  {
    FileSizeLimit limit(12);
    a.append("0123");                                             // 7 bytes: fits
    msg = test::error_of([&] { a.append("456789abcdef"); });  // 5 of 12 bytes fit, then EFBIG
  }
  EXPECT_EQ(msg, path + ": write failed (File too large)");
  EXPECT_EQ(slurp(path), "old0123");  // the earlier pieces, byte for byte, none of the failed one
  EXPECT_EQ(test::error_of([&] { a.append("more"); }), path + ": an earlier write failed");
  EXPECT_EQ(slurp(path), "old0123");
}

TEST_F(AtomicFileTest, AppendFileRemovesAFileItCreatedAndNeverFilled) {
  const std::string path = (dir_ / "new.log").string();
  std::string msg;
  {
    FileSizeLimit limit(0);  // no byte may be written: as a disk already full
    AppendFile a(path, true);
    EXPECT_TRUE(fs::exists(path));
    msg = test::error_of([&] { a.append("first"); });
  }
  EXPECT_EQ(msg, path + ": write failed (File too large)");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_NE(test::error_of([] { AppendFile a("/nonexistent-dir/x.log", false); })
                .find("/nonexistent-dir/x.log: cannot open for writing (No such file or directory)"),
            std::string::npos);
}

TEST_F(AtomicFileTest, BadPathsAreUserErrors) {
  auto msg = [](const std::string& p) {
    try {
      check_output_path(p);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  EXPECT_EQ(msg(dir_.string()), dir_.string() + ": is a directory (expected an output file name)");
  const std::string missing = (dir_ / "no" / "x.h5").string();
  EXPECT_EQ(msg(missing), missing + ": cannot write, the folder " + (dir_ / "no").string() + " does not exist");
  EXPECT_EQ(msg(""), "an output file name is required");
  EXPECT_EQ(msg((dir_ / "fine.h5").string()), "<accepted>");
  EXPECT_EQ(files_in(dir_), 1u);  // checking creates nothing
}

}  // namespace
}  // namespace vlm

// Tests of AtomicFile (io/atomic_file.h): the final file appears only on commit and
// replaces the old one whole; without commit the old file stays and no temporary file is
// left; bad output paths are refused before anything is created.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "io/atomic_file.h"

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

// The file helpers of the tests (see files.h).
#include "tests/support/files.h"

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vlm::test {

namespace fs = std::filesystem;

std::string stderr_of(const std::function<void()>& f) {
  const std::string path = scratch_dir("stderr_of") + "/stderr.txt";
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* sink = std::fopen(path.c_str(), "w");
  if (saved < 0 || sink == nullptr) throw std::runtime_error("stderr_of: cannot redirect stderr");
  dup2(fileno(sink), 2);
  {
    struct Restore {  // stderr back, also when f throws
      int saved;
      FILE* sink;
      ~Restore() {
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
        std::fclose(sink);
      }
    } restore{saved, sink};
    f();
  }
  return read_file(path);
}

std::string scratch_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("vlm_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string gzip(const std::string& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("gzip: cannot start zlib");
  std::string out(deflateBound(&z, uLong(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data())), z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data()), z.avail_out = uInt(out.size());
  const int r = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (r != Z_STREAM_END) throw std::runtime_error("gzip: deflate failed");
  return out;
}

void TempDirTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = scratch_dir(std::string(info->test_suite_name()) + "." + info->name());
}

void TempDirTest::TearDown() { fs::remove_all(dir_); }

std::string TempDirTest::write(const std::string& name, const std::string& text) {
  const std::string path = (dir_ / name).string();
  write_file(path, text);
  return path;
}

CommandResult run_command(const std::string& cmd, const std::string& dir) {
  const std::string o = dir + "/stdout.txt", e = dir + "/stderr.txt";
  const int rc = std::system((cmd + " >" + o + " 2>" + e).c_str());
  CommandResult r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_file(o);
  r.err = read_file(e);
  return r;
}

}  // namespace vlm::test

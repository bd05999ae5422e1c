// Tests of the input guards in core/: one_line() of every UserError message, bounded file
// reading (base/file_read.h: directories, limits, endless devices), the allocation check
// (base/memory_check.h) and UTF-8 validation (base/utf8.h) against hand-made byte strings.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "base/file_read.h"
#include "base/memory_check.h"
#include "base/utf8.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

TEST(InputLimits, UserErrorIsAlwaysOneLine) {
  EXPECT_STREQ(UserError("usage: x\n  build   a\n  inspect b\n").what(), "usage: x; build   a; inspect b");
  EXPECT_STREQ(UserError("a\r\nb\tc\x1b[31m\x7f").what(), "a; b c?[31m?");
  EXPECT_STREQ(UserError("\n\nlead").what(), "lead");
  // Bytes that are not UTF-8 (a binary file quoted): '?', valid characters kept.
  EXPECT_STREQ(UserError("caf\xe9 \xC3\xA9 \xff\xfe!").what(), "caf? \xC3\xA9 ?\?!");
  const std::string long_msg(5000, 'x');
  EXPECT_EQ(std::string(UserError(long_msg).what()), std::string(kMaxUserErrorBytes, 'x') + "...");
  // The cut never splits a UTF-8 character: 999 x then a 2-byte character at 999..1000.
  const std::string e = std::string(kMaxUserErrorBytes - 1, 'x') + "\xC3\xA9" + "tail";
  EXPECT_EQ(std::string(UserError(e).what()), std::string(kMaxUserErrorBytes - 1, 'x') + "...");
}

TEST(InputLimits, ReadFileBounded) {
  const fs::path dir = fs::temp_directory_path() / ("vlm_limits_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string f = (dir / "a.txt").string();
  std::ofstream(f) << "hello";
  EXPECT_EQ(read_file_bounded(f, 5, "text"), "hello");
  EXPECT_EQ(error_of([&] { read_file_bounded(f, 4, "text file"); }),
            f + ": text file of 5 bytes is larger than the limit of 4 bytes");
  EXPECT_EQ(error_of([&] { read_file_bounded(dir.string(), 4, "text file"); }),
            dir.string() + ": is a directory (expected a text file)");
  EXPECT_EQ(error_of([&] { read_file_bounded((dir / "none").string(), 4, "text file"); }),
            (dir / "none").string() + ": cannot open text file (No such file or directory)");
  // A device without end: read up to the limit, and at most kStreamLimit, then refused.
  const std::string stream = " bytes (of a pipe or device; give a regular file)";
  EXPECT_EQ(error_of([&] { read_file_bounded("/dev/zero", 100000, "config file"); }),
            "/dev/zero: config file is larger than the limit of 100000" + stream);
  EXPECT_EQ(error_of([&] { read_file_bounded("/dev/zero", uint64_t(8) << 30, "JSONL file"); }),
            "/dev/zero: JSONL file is larger than the limit of " + std::to_string(kStreamLimit) + stream);
  EXPECT_EQ(read_file_bounded("/dev/null", 10, "x"), "");
  // A named pipe: read when a program writes it; refused when none does (no wait for ever).
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "from a pipe"; });  // the open waits for the reader
  EXPECT_EQ(read_file_bounded(fifo, 100, "config file"), "from a pipe");
  writer.join();
  const std::string none = error_of([&] { read_file_bounded(fifo, 100, "config file"); });
  EXPECT_EQ(none.rfind(fifo + ": config file is a", 0), 0u) << none;
  EXPECT_NE(none.find("pipe"), std::string::npos) << none;
  fs::remove_all(dir);
}

TEST(InputLimits, AllocationCheckNamesTheField) {
  EXPECT_GT(allocatable_bytes(), uint64_t(1) << 20);
  EXPECT_NO_THROW(require_allocatable(1 << 20, "small"));
  const std::string msg = error_of([] { require_allocatable(uint64_t(1) << 62, "x.h5: dataset /a"); });
  EXPECT_EQ(msg.rfind("x.h5: dataset /a: needs 4294967296.0 GiB, more than the ", 0), 0u) << msg;
  EXPECT_NE(msg.find("GiB of memory available"), std::string::npos) << msg;
  EXPECT_EQ(mul_sat(uint64_t(1) << 40, uint64_t(1) << 30), UINT64_MAX);
  EXPECT_EQ(mul_sat(6, 7), 42u);
}

TEST(InputLimits, Utf8Validation) {
  EXPECT_EQ(utf8_invalid_at(""), kUtf8Valid);
  EXPECT_EQ(utf8_invalid_at("plain ascii"), kUtf8Valid);
  EXPECT_EQ(utf8_invalid_at("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), kUtf8Valid);
  EXPECT_EQ(utf8_invalid_at(std::string("a\0b", 3)), kUtf8Valid);  // NUL is UTF-8
  EXPECT_EQ(utf8_invalid_at("caf\xE9"), 3u);                         // Latin-1
  EXPECT_EQ(utf8_invalid_at("ab\xC3"), 2u);                          // truncated
  EXPECT_EQ(utf8_invalid_at("\xC0\xAF"), 0u);                        // overlong '/'
  EXPECT_EQ(utf8_invalid_at("x\xED\xA0\x80"), 1u);                   // surrogate U+D800
  EXPECT_EQ(utf8_invalid_at("\xF4\x90\x80\x80"), 0u);                // above U+10FFFF
  EXPECT_EQ(utf8_invalid_at("\x80"), 0u);                            // lone continuation
  EXPECT_EQ(utf8_invalid_at("\xE2\x82x"), 0u);                       // bad continuation
  EXPECT_NO_THROW(require_utf8("caf\xC3\xA9", "--prompt"));
  EXPECT_EQ(error_of([] { require_utf8("ab\xC3", "x.h5: dataset /captions/text entry 7 (caption 7)"); }),
            "x.h5: dataset /captions/text entry 7 (caption 7) is not valid UTF-8 at byte 2 of 3 (expected UTF-8 text)");
}

TEST(InputLimits, BytesForMessages) {
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(16448), "16.1 KiB");
  EXPECT_EQ(format_bytes(3.5 * (1 << 20)), "3.5 MiB");
  EXPECT_EQ(format_bytes(2.5 * double(1ull << 30)), "2.50 GiB");
  EXPECT_EQ(format_bytes_exact(17), "17 B");
  EXPECT_EQ(format_bytes_exact(16448), "16.1 KiB (16448 B)");
}

}  // namespace
}  // namespace vlm

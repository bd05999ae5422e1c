// Helpers of the libFuzzer targets (tests/fuzz/CMakeLists.txt): a scratch folder per
// process (in /dev/shm when there is one, so file round trips stay in memory) and the
// one rule every target checks besides the sanitizers: a reader may refuse its input
// only with vlm::UserError; any other exception escaping is a crash libFuzzer reports.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"

namespace vlm::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path d = base / ("vlm_fuzz_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

inline std::string scratch(const std::string& name) { return scratch_dir() + "/" + name; }

inline void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), std::streamsize(size));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Runs f; a UserError is an accepted refusal of the input.
template <typename F>
void refusal_allowed(F&& f) {
  try {
    f();
  } catch (const UserError&) {
  }
}

// The converters print progress and warnings to stdout: keep the fuzzer's output readable.
inline void quiet_stdout() { (void)std::freopen("/dev/null", "w", stdout); }

}  // namespace vlm::fuzz

// Helpers of the vision config tests: running Config::parse on a word list, catching a
// UserError's message, a temp folder per test, and a safetensors header reader (the
// tests link vlm_vision and vlm_core only, so the header is parsed here with core/json).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/json.h"

namespace vlm::test {

// Runs parse() on the words of `args` (argv[0] = "vlm").
inline bool parse(Config& c, const std::vector<std::string>& args) {
  std::vector<const char*> argv{"vlm"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return c.parse(int(argv.size()), argv.data());
}

// The message of the UserError that f throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A fresh folder per test, removed at the end.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("vlm_vision_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Writes `text` to <dir>/<name> and returns the path.
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

// The JSON header of a safetensors file: {name: {dtype, shape, data_offsets}, "__metadata__": {...}}.
inline json::Value safetensors_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot open");
  unsigned char n8[8];
  f.read(reinterpret_cast<char*>(n8), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | n8[i];
  if (!f || n > (1u << 20)) throw UserError(path + ": bad safetensors header length");
  std::string text(n, '\0');
  f.read(text.data(), std::streamsize(n));
  return json::parse(text, path);
}

}  // namespace vlm::test

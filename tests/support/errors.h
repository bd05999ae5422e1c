// Checking user errors: error_of(f) runs f and returns the message of the UserError it
// throws ("" when it throws none, so a check of the message's content fails);
// parse_args runs Config::parse on a word list (argv[0] = "vlm").
#pragma once
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"

namespace vlm::test {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

inline bool parse_args(Config& c, const std::vector<std::string>& args) {
  std::vector<const char*> argv{"vlm"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return c.parse(int(argv.size()), argv.data());
}

}  // namespace vlm::test

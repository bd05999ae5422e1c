// The `vlm` program: `vlm <command> [options]`. User errors print one line and exit 2;
// internal errors abort with file:line (core/error.h).
#include <cstdio>
#include <exception>
#include <string>

#include "apps/command.h"
#include "core/error.h"

namespace vlm {

std::vector<Command>& command_table() {
  static std::vector<Command> table;
  return table;
}
bool register_command(const Command& c) {
  command_table().push_back(c);
  return true;
}
const std::vector<Command>& commands() { return command_table(); }

static void print_usage() {
  std::printf("usage: vlm <command> [options]   (vlm <command> --help for its options)\n\ncommands:\n");
  for (const auto& c : commands()) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
}

}  // namespace vlm

int main(int argc, char** argv) {
  using namespace vlm;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    try {
      return c.fn(argc - 1, argv + 1);
    } catch (const UserError& e) {
      std::fprintf(stderr, "vlm %s: error: %s\n", name.c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vlm %s: error: %s\n", name.c_str(), e.what());
      return 2;
    }
  }
  std::fprintf(stderr, "vlm: unknown command '%s' (run `vlm --help` for the list)\n", name.c_str());
  return 2;
}

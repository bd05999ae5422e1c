// The command table and the dispatcher of `vlm` (rules in command.h).
#include "apps/command.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "base/stop_signal.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/runtime.h"

namespace vlm {

namespace {

std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}

const Command* find(const std::string& path) {
  for (const Command& c : table())
    if (c.path == path) return &c;
  return nullptr;
}

// The direct subcommands of `path` ("" = the top-level commands), sorted.
std::vector<Command> children(const std::string& path) {
  std::vector<Command> out;
  const std::string prefix = path.empty() ? "" : path + " ";
  for (const Command& c : commands())
    if (c.path.size() > prefix.size() && c.path.compare(0, prefix.size(), prefix) == 0 &&
        c.path.find(' ', prefix.size()) == std::string::npos)
      out.push_back(c);
  return out;
}

std::string last_word(const std::string& path) { return path.substr(path.rfind(' ') + 1); }

std::string group_usage(const std::string& path) {
  const std::string who = path.empty() ? "vlm" : "vlm " + path;
  const char* what = path.empty() ? "command" : "subcommand";
  std::string s = cat("usage: ", who, " <", what, "> [options]   (", who, " <", what, "> --help for its options)\n\n",
                      what, "s:\n");
  for (const Command& c : children(path)) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-12s %s\n", last_word(c.path).c_str(), c.summary.c_str());
    s += line;
  }
  return s;
}

std::string child_list(const std::string& path) {
  std::string s;
  for (const Command& c : children(path)) s += (s.empty() ? "" : ", ") + last_word(c.path);
  return s;
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

// True when --help or -h comes before any "--" (as Config::parse sees it).
bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i)
    if (is_help(argv[i])) return true;
  return false;
}

// Runs a leaf command on argv[0..argc) (argv[0] is its last path word).
int run_command(const Command& c, int argc, char** argv) {
  const std::string who = "vlm " + c.path;
  Config cfg(who, c.usage);
  if (c.options) c.options(cfg);
  if (wants_help(argc, argv)) {
    std::fputs(cfg.help().c_str(), stdout);
    return 0;
  }
  cfg.allow_positionals(c.positional, "FILE");
  const auto parse = [&] { cfg.parse(argc, argv); };
  std::optional<MpiSession> mpi;  // outlives the error report (which may MPI_Abort)
  try {
    if (c.multi_rank) {
      mpi.emplace(nullptr, nullptr);
      parse_on_every_rank(cfg, parse);
    } else {
      parse();
    }
    return c.run(cfg);
  } catch (const Interrupted& e) {  // every rank stopped at the same step and said why
    return e.exit_code();
  } catch (const std::exception& e) {
    return report_command_error(who, e);
  }
}

}  // namespace

bool register_command(const Command& c) {
  VLM_ASSERT(!find(c.path), "command '", c.path, "' registered twice");
  table().push_back(c);
  return true;
}

std::vector<Command> commands() {
  std::vector<Command> t = table();
  std::sort(t.begin(), t.end(), [](const Command& a, const Command& b) { return a.path < b.path; });
  return t;
}

int run_vlm(int argc, char** argv) {
  // The longest registered path spelled by the leading words.
  std::string path;
  int depth = 1;
  for (; depth < argc && argv[depth][0] != '-'; ++depth) {
    const std::string next = path.empty() ? argv[depth] : path + " " + argv[depth];
    if (!find(next)) break;
    path = next;
  }
  const std::string next = depth < argc ? argv[depth] : "";
  if (path.empty()) {
    if (is_help(next) || next == "help") {
      std::fputs(group_usage("").c_str(), stdout);
      return 0;
    }
    if (next.empty())
      std::fprintf(stderr, "vlm: error: missing command (%s; run `vlm --help`)\n", child_list("").c_str());
    else
      std::fprintf(stderr, "vlm: error: unknown command '%s' (run `vlm --help` for the list)\n", next.c_str());
    return 2;
  }
  const Command& c = *find(path);
  if (c.run) return run_command(c, argc - depth + 1, argv + depth - 1);
  if (is_help(next)) {
    std::fputs(group_usage(path).c_str(), stdout);
    return 0;
  }
  if (next.empty())
    std::fprintf(stderr, "vlm %s: error: missing subcommand (%s; run `vlm %s --help`)\n", path.c_str(),
                 child_list(path).c_str(), path.c_str());
  else
    std::fprintf(stderr, "vlm %s: error: unknown subcommand '%s' (expected %s; run `vlm %s --help`)\n", path.c_str(),
                 next.c_str(), child_list(path).c_str(), path.c_str());
  return 2;
}

}  // namespace vlm

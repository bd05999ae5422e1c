// The commands of the `vlm` program and their one dispatcher (apps/command.cpp; main()
// only calls run_vlm). A command is a path of words: "topology", "selfcheck",
// "data build", "lm logits". A path that others extend ("data", "lm") is a group: it
// has no run function and lists its subcommands. Each apps/cmd_*.cpp registers its
// entries with VLM_COMMAND. Uniform behaviour of every path:
//   vlm --help | vlm <group> --help | vlm <path> --help   usage on stdout, exit 0
//   unknown or missing command or subcommand             one line on stderr, exit 2
//   bad input (UserError)       "vlm <path>: error: <message>" on stderr, exit 2
// The dispatcher builds the command's Config ("vlm <path>", usage, the options the
// command registers), parses the arguments after the path, refuses more positional
// arguments than the command takes, then calls run(cfg), which returns the exit code.
// A multi_rank command (run under mpirun/srun) gets MPI started before parsing, its
// options step agreed across ranks, and the cross-rank error policy of
// parallel/runtime.h (report_command_error).
#pragma once
#include <string>
#include <vector>

namespace vlm {

class Config;

struct Command {
  std::string path;                     // words separated by one space
  std::string summary;                  // one line, listed by the parent's --help
  std::string usage = "";               // after "usage: vlm <path> [options]" in --help
  void (*options)(Config&) = nullptr;   // registers the command's options
  int (*run)(const Config&) = nullptr;  // nullptr: a group
  int positional = 0;                   // positional arguments taken at most (FILE)
  bool multi_rank = false;
};

// Adds a command to the table; returns true (for static registration).
bool register_command(const Command& c);
// The table, sorted by path.
std::vector<Command> commands();
// Dispatches `vlm ...` (argv[0] is the program) and returns the exit code.
int run_vlm(int argc, char** argv);

}  // namespace vlm

// VLM_COMMAND(id, {path, summary, usage, options, run, positional, multi_rank});
#define VLM_COMMAND(id, ...) static const bool vlm_command_##id = ::vlm::register_command(::vlm::Command __VA_ARGS__)

// Subcommands of the `vlm` program. Each apps/cmd_*.cpp registers itself with
// VLM_COMMAND(name, summary, function); main() dispatches on argv[1].
// A command's function receives argv with the subcommand name as argv[0]; it throws
// vlm::UserError for bad input (main prints one line and exits 2).
#pragma once
#include <string>
#include <vector>

namespace vlm {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string name;
  std::string summary;
  CommandFn fn;
};

// Adds a command to the table; returns true (for static registration).
bool register_command(const Command& c);
const std::vector<Command>& commands();

}  // namespace vlm

#define VLM_COMMAND(name, summary, fn) \
  static const bool vlm_command_registered_##fn = ::vlm::register_command({name, summary, fn})

// The `vlm` program: `vlm <command> [<subcommand>] [options]`. The commands, their
// dispatch, help and exit codes are in apps/command.h; user errors print one line and
// exit 2, internal errors abort with file:line (base/error.h).
#include "apps/command.h"

int main(int argc, char** argv) { return vlm::run_vlm(argc, argv); }

// A command run in the background and sent a signal once a condition holds: the
// preemption tests (tests/checkpoint/test_preemption.cpp) signal `vlm train` as a
// cluster does (SIGTERM to the process, SIGUSR1 to mpirun, which forwards it, or a
// signal to one rank only).
#pragma once
#include <functional>
#include <string>

namespace vlm::test {

struct SignalledRun {
  bool sent = false;  // ready() held while the command ran, and the signal went out
  int status = -1;    // exit status; -1 when a signal ended the command
  int signal = 0;     // the signal that ended it; 0 when it exited
  std::string out, err;
};

// Runs `cmd` through the shell (`exec cmd`, in a process group of its own; its stdout and
// stderr in <dir>/stdout.txt and <dir>/stderr.txt) and polls ready() every 20 ms. When it
// holds, sends `sig` to the command's process, or, with rank >= 0, to the child of it
// (mpirun's) whose environment says OMPI_COMM_WORLD_RANK=rank. Then waits for the end.
// A command still running after timeout_s is killed (its whole group) and fails the
// current test, so no test hangs.
SignalledRun run_and_signal(const std::string& cmd, const std::string& dir, const std::function<bool()>& ready,
                            int sig, int rank = -1, double timeout_s = 180);

}  // namespace vlm::test

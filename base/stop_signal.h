// A graceful stop on a signal (docs/preemption.md): what a cluster sends
// before it takes the nodes back (SLURM: SIGTERM to every task, then SIGKILL after its
// KillWait; `--signal=USR1@120` ahead of the time limit; mpirun forwards SIGUSR1 to
// every rank), and Ctrl-C.
//
//   StopSignal stop;                 // SIGTERM, SIGINT, SIGUSR1 now set a flag
//   for (...) {
//     work();
//     if (int sig = stop.pending()) { stop.take(); finish(); throw Interrupted(sig, true); }
//   }
//
// Invariants:
//  - While a StopSignal lives (one at a time), the first of those signals ends nothing:
//    pending() returns it from then on. A second SIGINT ends the process as it would
//    have without us (the default action), so a user who presses Ctrl-C twice is never
//    kept waiting; a repeated SIGTERM or SIGUSR1 changes nothing (schedulers send
//    duplicates: srun and slurmstepd may both signal a task; SIGKILL ends it at once).
//  - A signal ignored when the StopSignal is made (nohup, a background job's SIGINT)
//    stays ignored.
//  - Its destructor restores the handlers it replaced. A signal that arrived and was
//    not taken is raised again then, with those handlers: none is swallowed; except
//    while an exception unwinds the holder (an error while a signal was pending), so the
//    error is reported and ends the process with its own exit code.
//  - The handler only stores the number (async-signal-safe); nothing else runs inside
//    it. System calls interrupted by it restart (SA_RESTART).
//  - Interrupted is the agreed end of the work for a signal: the command that catches it
//    exits with 128 + the signal's number (apps/command.cpp), as a shell reports a
//    process the signal ended, so a job script can tell "stopped, resume me" from
//    "finished" (0) and from "bad input" (2); at the work's own time limit (no signal),
//    kExitTimeLimit.
#pragma once
#include <csignal>
#include <stdexcept>
#include <string>

namespace vlm {

class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The first signal received since construction (SIGTERM, SIGINT or SIGUSR1), or 0.
  int pending() const;
  // The holder acts on the pending signal: the destructor will not raise it again.
  void take();

 private:
  struct sigaction old_[3];
  bool taken_ = false;
};

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string signal_name(int sig);

// Exit code of work stopped at its own time limit (train.time_limit) after saving.
inline constexpr int kExitTimeLimit = 3;

// The work stopped early after finishing what it could: for `signal`, or (signal 0) at
// its time limit, with what it had done saved or not; every rank throws it at the same
// point.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(int signal, bool saved);  // "stopped by SIGTERM", "stopped at its time limit"
  int signal() const { return signal_; }
  bool saved() const { return saved_; }  // a checkpoint of the point it stopped at exists
  int exit_code() const { return signal_ ? 128 + signal_ : kExitTimeLimit; }

 private:
  int signal_;
  bool saved_;
};

}  // namespace vlm

// The end of the steps asked by a signal or train.time_limit (train/trainer_state.h):
// stop_if_asked, and the clock of the time limit.
#include <cstdio>

#include "base/error.h"
#include "base/stop_signal.h"
#include "parallel/communicator.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"
#include "train/trainer_state.h"

namespace vlm {

double seconds_of_steps() {
  static const TrainClock::time_point first = TrainClock::now();  // the first call: the process's first steps
  return seconds_since(first);
}

// The ranks agree whether any of them received a stop signal or passed train.time_limit
// (one all-reduce of the world: SLURM signals every task, mpirun forwards SIGUSR1 to
// every rank, a user may signal one, clocks differ). When one did, every rank saves step
// n (unless it was just saved or train.save_every = -1) and throws Interrupted: the
// command exits 128 + the signal, or 3 at the limit. The limit does not stop the run's
// last step: the run is done, and its final validation follows. With neither a handler
// (train.on_signal=exit) nor a limit there is nothing to ask: no all-reduce.
void Trainer::State::stop_if_asked(StopSignal* stop, int64_t n, bool saved) {
  if (!stop && train.time_limit_min <= 0) return;
  const bool over =
      train.time_limit_min > 0 && n < last_step() && seconds_of_steps() >= 60 * train.time_limit_min;
  const std::vector<double> any = all_reduce_values(rt.groups().world(), rt.backend().default_stream(),
                                                    {double(stop ? stop->pending() : 0), double(over)}, ReduceOp::Max);
  const int sig = int(any[0]);
  if (sig == 0 && any[1] == 0) return;
  if (stop) stop->take();  // acted on: a save that fails is reported as the error it is (exit code 2)
  const bool saves = train.save_every >= 0;
  if (!saved && saves) save(n);
  if (rt.root()) {
    const std::string why = sig ? cat("by ", signal_name(sig)) : cat("at train.time_limit (", train.time_limit_min,
                                                                     " min)");
    std::printf("vlm train: stopped %s after step %lld of %lld; %s\n", why.c_str(), (long long)n, (long long)total,
                saves ? "saved there (train.resume goes on from it)" : "nothing saved (train.save_every = -1)");
    std::fflush(stdout);
  }
  throw Interrupted(sig, saves);
}

}  // namespace vlm

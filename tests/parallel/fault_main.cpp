// parallel_fault: the failure paths of the collectives, run under mpirun by
// run_fault.cmake (needs 4 ranks; TP=2, one emulated node, parallel.timeout_s=3).
//   parallel_fault timeout : rank 1 skips an all-reduce of TP group 0 and sleeps; rank 0
//                            must abort every rank after 3 s with the timeout message
//                            naming all_reduce, tp[0] and its rank.
//   parallel_fault dead    : rank 2 is killed (SIGKILL) before a world all-reduce; the
//                            others must exit non-zero within the timeout.
//   parallel_fault startup : rank 1 sleeps instead of starting the runtime; the others
//                            must abort after 3 s with the message naming the first
//                            start-up step (parallel/runtime.h), not wait for ever.
// Ranks waiting in a collective print "entering collective at <epoch s>" so the script
// can check how long they took to go. Reaching the end means the guard failed: exit 0
// is the failure signal the script checks for.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/runtime.h"

int main(int argc, char** argv) {
  using namespace vlm;
  MpiSession mpi(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mpi.size() != 4 || (mode != "timeout" && mode != "dead" && mode != "startup")) {
    std::fprintf(stderr, "usage: mpirun -np 4 parallel_fault timeout|dead|startup\n");
    return 2;
  }
  RuntimeOptions opts;  // device cpu
  opts.parallel.tp = 2;
  opts.parallel.ranks_per_node = 4;
  opts.parallel.timeout_s = 3.0;
  auto entering = [&] {
    std::printf("rank %d entering collective at %lld\n", mpi.rank(), (long long)std::time(nullptr));
    std::fflush(stdout);
  };
  const auto sleep_long = [] { std::this_thread::sleep_for(std::chrono::seconds(30)); };
  if (mode == "startup") {
    if (mpi.rank() == 1) {
      sleep_long();
    } else {
      if (mpi.rank() == 0) entering();
      Runtime rt = start_runtime(opts);
    }
    std::printf("rank %d: the fault went unnoticed\n", mpi.rank());
    return 0;
  }

  Runtime rt = start_runtime(opts);
  ProcessGroups& groups = rt.groups();
  Stream& s = cpu_backend().default_stream();
  Tensor x = Tensor::from_vector(std::vector<float>(4, 1.f), Shape{4});
  groups.world().barrier(s);

  if (mode == "timeout") {
    if (mpi.rank() == 1) {
      sleep_long();  // skips the all-reduce of tp[0]
    } else {
      if (mpi.rank() == 0) entering();
      groups.tp().all_reduce(s, x);  // tp[1] (ranks 2, 3) completes; tp[0] cannot
      sleep_long();
    }
  } else {
    if (mpi.rank() == 2) raise(SIGKILL);
    entering();
    groups.world().all_reduce(s, x);
  }
  std::printf("rank %d: the fault went unnoticed\n", mpi.rank());
  return 0;
}

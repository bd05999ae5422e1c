// ParallelOptions: the launch layout options of the parallel/ module, registered once
// in the Config under `parallel.*` and read into a plain struct so that the rest of
// the module (and its tests) never touch the Config.
//   parallel.tp             tensor-parallel group size (>= 1); world = tp * dp
//   parallel.ranks_per_node ranks per node; 0 = detect with MPI_COMM_TYPE_SHARED,
//                           > 0 emulates nodes of that size (tests, one CPU machine)
//   parallel.timeout_s      a collective not complete after this many seconds aborts
//                           every rank with a message (no silent hangs)
#pragma once
#include "base/options.h"

namespace vlm {

struct ParallelOptions {
  int tp = 1;
  int ranks_per_node = 0;    // 0 = detect
  double timeout_s = 300.0;  // > 0
};

const OptionSet<ParallelOptions>& parallel_options();  // their declaration (base/options.h)
void register_parallel_options(Config& cfg);
ParallelOptions read_parallel_options(const Config& cfg);

}  // namespace vlm

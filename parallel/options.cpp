// The `parallel.*` options (see options.h).
#include "parallel/options.h"

namespace vlm {

const OptionSet<ParallelOptions>& parallel_options() {
  static const OptionSet<ParallelOptions> set([](OptionSet<ParallelOptions>& s) {
    s.option("parallel.tp", &ParallelOptions::tp,
             "tensor-parallel group size (adjacent ranks inside one node); world = tp x dp")
        .range(1, 1 << 16)
        .alias("tp");  // the spelling of the launch examples: `--tp 8`
    s.option("parallel.ranks_per_node", &ParallelOptions::ranks_per_node,
             "ranks per node; 0 = detect (MPI shared-memory split), > 0 emulates nodes of this size")
        .range(0, 1 << 20);
    s.option("parallel.timeout_s", &ParallelOptions::timeout_s,
             "seconds a collective may take before every rank aborts with a message")
        .range(0.001, 1e7);
  });
  return set;
}

void register_parallel_options(Config& cfg) { parallel_options().add_to(cfg); }
ParallelOptions read_parallel_options(const Config& cfg) { return parallel_options().read(cfg); }

}  // namespace vlm

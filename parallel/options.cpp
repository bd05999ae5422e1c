// Registration and reading of the `parallel.*` options (see options.h).
#include "parallel/options.h"

#include "base/config.h"

namespace vlm {

void register_parallel_options(Config& cfg) {
  cfg.add_int("parallel.tp", 1, "tensor-parallel group size (adjacent ranks inside one node); world = tp x dp",
              1, 1 << 16);
  cfg.add_int("parallel.ranks_per_node", 0,
              "ranks per node; 0 = detect (MPI shared-memory split), > 0 emulates nodes of this size", 0,
              1 << 20);
  cfg.add_float("parallel.timeout_s", 300.0,
                "seconds a collective may take before every rank aborts with a message", 0.001, 1e7);
  cfg.add_alias("tp", "parallel.tp");  // the spelling of the launch examples: `--tp 8`
}

ParallelOptions read_parallel_options(const Config& cfg) {
  ParallelOptions o;
  o.tp = int(cfg.get_int("parallel.tp"));
  o.ranks_per_node = int(cfg.get_int("parallel.ranks_per_node"));
  o.timeout_s = cfg.get_float("parallel.timeout_s");
  return o;
}

}  // namespace vlm

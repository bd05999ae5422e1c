// `vlm topology`: prints the parallel layout of the launch (parallel/topology.h) and
// checks that every group forms and communicates: each rank all-reduces its world rank
// over its TP and DP groups and compares with the sum of the members the layout names.
//   mpirun --oversubscribe -np 16 vlm topology --parallel.tp 8 --parallel.ranks_per_node 8
// Rank 0 prints; an invalid layout is refused on every rank and reported once (exit 2,
// the runtime start's policy in parallel/runtime.h). The check runs on host
// communicators (MPI), whatever GPUs the machine has.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/config.h"
#include "core/backend.h"
#include "core/tensor.h"
#include "parallel/runtime.h"

namespace vlm {

namespace {

// True when the all-reduced sum of world ranks over `comm` equals the members' sum.
bool group_sums_match(Communicator& comm, const std::vector<int>& members, int world_rank) {
  Stream& s = cpu_backend().default_stream();
  Tensor x = Tensor::from_vector(std::vector<int32_t>{world_rank}, Shape{1});
  comm.all_reduce(s, x, ReduceOp::Sum);
  int expected = 0;
  for (int m : members) expected += m;
  return x.ptr<int32_t>()[0] == expected;
}

void topology_options(Config& cfg) { register_runtime_options(cfg, /*with_device=*/false); }

int run_topology(const Config& cfg) {
  Runtime rt = start_runtime(cfg);  // no --device option: host communicators
  const Topology& t = rt.topology();
  ProcessGroups& groups = rt.groups();
  const RankPlace me = t.self();
  int ok = group_sums_match(groups.tp(), t.tp_members(me.tp_group), me.rank) &&
           group_sums_match(groups.dp(), t.dp_members(me.dp_group), me.rank);
  // Every rank learns how many ranks found their groups right.
  Tensor count = Tensor::from_vector(std::vector<int32_t>{ok}, Shape{1});
  groups.world().all_reduce(cpu_backend().default_stream(), count, ReduceOp::Sum);
  ok = count.ptr<int32_t>()[0] == t.world_size();
  if (rt.root()) {
    std::printf("%s", t.layout_table().c_str());
    std::printf("groups: %d TP group(s) of %d, %d DP group(s) of %d: %s\n", t.dp(), t.tp(), t.tp(), t.dp(),
                ok ? "all-reduce over every group ok" : "MISMATCH (see the layout above)");
    std::printf("bytes on world from rank 0: %s\n", groups.world().counters().str().c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

VLM_COMMAND(topology, {.path = "topology",
                       .summary = "print the parallel layout (ranks, nodes, TP/DP groups) of an mpirun/srun launch",
                       .usage = "(under mpirun -np N) [--parallel.tp T] [--parallel.ranks_per_node R]\n"
                                "prints rank -> node, local rank, TP group/rank, DP group/rank and checks every group\n",
                       .options = topology_options,
                       .run = run_topology,
                       .multi_rank = true});

}  // namespace vlm

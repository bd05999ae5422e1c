// Topology: layout arithmetic, validation, printout, and detection with MPI
// (see topology.h for the formulas and invariants).
#include "parallel/topology.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "parallel/mpi/mpi_check.h"

namespace vlm {

Topology Topology::compute(int world_size, int world_rank, int ranks_per_node, int tp, bool emulated) {
  VLM_REQUIRE(world_size >= 1, "world size must be >= 1, got ", world_size);
  VLM_ASSERT(world_rank >= 0 && world_rank < world_size, "rank ", world_rank, " of ", world_size);
  VLM_REQUIRE(tp >= 1, "parallel.tp must be >= 1, got ", tp);
  VLM_REQUIRE(ranks_per_node >= 1, "ranks per node must be >= 1, got ", ranks_per_node);
  VLM_REQUIRE(world_size % tp == 0, "parallel.tp=", tp, " does not divide the world size ", world_size,
              " (world must equal tp x dp)");
  VLM_REQUIRE(world_size % ranks_per_node == 0, "ranks per node ", ranks_per_node,
              " does not divide the world size ", world_size,
              " (set parallel.ranks_per_node to a divisor, or launch the same number of ranks on every node)");
  // tp <= ranks_per_node and tp | ranks_per_node <=> no TP group crosses a node boundary.
  if (ranks_per_node % tp != 0) {
    // Name the first TP group that would cross a node boundary.
    int g = 0;
    while ((g * tp) / ranks_per_node == (g * tp + tp - 1) / ranks_per_node) ++g;
    throw UserError(cat("parallel.tp=", tp, " does not divide the ", ranks_per_node,
                        " ranks per node: a TP group must stay inside one node (TP group ", g, " = ranks ",
                        g * tp, "..", g * tp + tp - 1, " would span nodes ", (g * tp) / ranks_per_node, " and ",
                        (g * tp + tp - 1) / ranks_per_node, ")"));
  }
  Topology t;
  t.world_size_ = world_size;
  t.world_rank_ = world_rank;
  t.ranks_per_node_ = ranks_per_node;
  t.tp_ = tp;
  t.emulated_ = emulated;
  return t;
}

RankPlace Topology::place(int rank) const {
  VLM_ASSERT(rank >= 0 && rank < world_size_, "rank ", rank, " of ", world_size_);
  RankPlace p;
  p.rank = rank;
  p.node = rank / ranks_per_node_;
  p.local_rank = rank % ranks_per_node_;
  p.tp_group = rank / tp_;
  p.tp_rank = rank % tp_;
  p.dp_group = p.tp_rank;
  p.dp_rank = p.tp_group;
  return p;
}

std::vector<int> Topology::tp_members(int tp_group) const {
  VLM_ASSERT(tp_group >= 0 && tp_group < dp(), "tp group ", tp_group);
  std::vector<int> m;
  for (int i = 0; i < tp_; ++i) m.push_back(tp_group * tp_ + i);
  return m;
}

std::vector<int> Topology::dp_members(int dp_group) const {
  VLM_ASSERT(dp_group >= 0 && dp_group < tp_, "dp group ", dp_group);
  std::vector<int> m;
  for (int i = 0; i < dp(); ++i) m.push_back(i * tp_ + dp_group);
  return m;
}

std::string Topology::layout_table() const {
  std::string s = cat("topology: world ", world_size_, " = tp ", tp_, " x dp ", dp(), "; ", num_nodes(),
                      " node(s) x ", ranks_per_node_, " ranks", emulated_ ? " (emulated: parallel.ranks_per_node)" : "",
                      "\n");
  const bool hosts = int(hostnames_.size()) == world_size_;
  size_t hw = 4;
  if (hosts)
    for (const auto& h : hostnames_) hw = std::max(hw, h.size());
  char line[512];
  std::snprintf(line, sizeof line, "%5s  %-*s  %4s  %5s  %8s  %7s  %8s  %7s\n", "rank", int(hw), hosts ? "host" : "",
                "node", "local", "tp_group", "tp_rank", "dp_group", "dp_rank");
  s += line;
  for (int r = 0; r < world_size_; ++r) {
    const RankPlace p = place(r);
    std::snprintf(line, sizeof line, "%5d  %-*s  %4d  %5d  %8d  %7d  %8d  %7d\n", r, int(hw),
                  hosts ? hostnames_[size_t(r)].c_str() : "", p.node, p.local_rank, p.tp_group, p.tp_rank,
                  p.dp_group, p.dp_rank);
    s += line;
  }
  return s;
}

Topology detect_topology(const ParallelOptions& opts) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  VLM_ASSERT(initialized, "detect_topology needs MPI to be initialised (parallel/mpi/mpi_session.h)");
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));

  // Host names (for the printout), gathered on every rank.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  std::vector<char> all(size_t(size) * MPI_MAX_PROCESSOR_NAME, 0);
  MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                          MPI_COMM_WORLD));
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    const char* h = all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME;
    hosts.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }

  int rpn = opts.ranks_per_node;
  if (rpn == 0) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int local_rank = 0, local_size = 1, leader = rank;
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_size(node, &local_size));
    MPI_CHECK(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node));
    MPI_CHECK(MPI_Comm_free(&node));
    int lo = local_size, hi = local_size;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    // Every rank reaches the same verdicts, so every rank throws the same error.
    VLM_REQUIRE(lo == hi, "nodes run different numbers of ranks (", lo, " to ", hi,
                "): launch the same number of ranks on every node, or set parallel.ranks_per_node");
    int blocked = (leader == (rank / local_size) * local_size && local_rank == rank - leader) ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &blocked, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    VLM_REQUIRE(blocked == 1, "ranks are not placed in blocks by node (rank r must be on node r / ", local_size,
                "): use mpirun --map-by slot (the default) or srun --distribution=block");
    rpn = local_size;
  }
  Topology t = Topology::compute(size, rank, rpn, opts.tp, opts.ranks_per_node != 0);
  t.set_hostnames(std::move(hosts));
  return t;
}

}  // namespace vlm

// Topology: where this rank sits in the parallel layout (docs/architecture.md, "Parallel layout").
//
//   world = nodes x ranks_per_node = tp x dp
//   node       = rank / ranks_per_node     local_rank = rank % ranks_per_node
//   tp_group   = rank / tp                 tp_rank    = rank % tp
//   dp_group   = tp_rank                   dp_rank    = tp_group
// TP groups are `tp` adjacent ranks ("tp first", as Megatron) and never span a node
// (tp divides ranks_per_node); DP groups take the same TP rank across all TP groups.
// Invariants after construction: every formula above holds and the layout was
// validated (invalid layouts throw UserError naming the option and the numbers).
// Nodes are detected with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) unless
// `parallel.ranks_per_node` emulates them; detection requires ranks placed by node in
// blocks (mpirun's default --map-by slot / core, srun --distribution=block).
#pragma once
#include <string>
#include <vector>

#include "parallel/options.h"

namespace vlm {

// The place of one rank in the layout.
struct RankPlace {
  int rank = 0;
  int node = 0;
  int local_rank = 0;
  int tp_group = 0;
  int tp_rank = 0;
  int dp_group = 0;
  int dp_rank = 0;
};

class Topology {
 public:
  // Pure layout computation + validation (no MPI): throws UserError when
  // world_size != tp * dp, ranks_per_node does not divide world_size, or tp does not
  // divide ranks_per_node (a TP group would span nodes). `emulated` only changes the
  // printout.
  static Topology compute(int world_size, int world_rank, int ranks_per_node, int tp,
                          bool emulated = false);

  int world_size() const { return world_size_; }
  int world_rank() const { return world_rank_; }
  int ranks_per_node() const { return ranks_per_node_; }
  int num_nodes() const { return world_size_ / ranks_per_node_; }
  int tp() const { return tp_; }
  int dp() const { return world_size_ / tp_; }
  bool emulated_nodes() const { return emulated_; }

  RankPlace place(int rank) const;  // any rank's place
  RankPlace self() const { return place(world_rank_); }
  // World ranks of a TP group (tp adjacent ranks) and of a DP group (stride tp).
  std::vector<int> tp_members(int tp_group) const;
  std::vector<int> dp_members(int dp_group) const;

  // Optional host names per world rank (filled by detect_topology), printed if set.
  void set_hostnames(std::vector<std::string> names) { hostnames_ = std::move(names); }
  // One summary line and a table: rank -> host, node, local rank, tp group/rank,
  // dp group/rank (one row per world rank).
  std::string layout_table() const;

 private:
  int world_size_ = 1;
  int world_rank_ = 0;
  int ranks_per_node_ = 1;
  int tp_ = 1;
  bool emulated_ = false;
  std::vector<std::string> hostnames_;
};

// Collective over MPI_COMM_WORLD (every rank calls it; MPI must be initialised):
// world rank/size from MPI, ranks per node detected or taken from the options, host
// names gathered, then Topology::compute. Throws UserError (on every rank alike) for
// an invalid layout, uneven nodes, or ranks not placed in blocks by node.
Topology detect_topology(const ParallelOptions& opts);

}  // namespace vlm

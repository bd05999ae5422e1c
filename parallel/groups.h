// ProcessGroups: the communicators of one rank for its layout (parallel/topology.h):
// world, its TP group ("tp[g]", g = tp_group, members = tp adjacent ranks) and its DP
// group ("dp[g]", g = dp_group = tp_rank, members with stride tp), each on the device
// the model runs on. make_communicator is the one factory: host (CPU) tensors get an
// MpiCommunicator, device (CUDA) tensors an NcclCommunicator (parallel/nccl/; when the
// CUDA backend is not compiled in, asking for one throws UserError).
// Construction is collective over MPI_COMM_WORLD; group ranks equal tp_rank / dp_rank.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "parallel/communicator.h"
#include "parallel/topology.h"

namespace vlm {

// Collective over `comm`. The communicator keeps its own copy of `comm`.
std::unique_ptr<Communicator> make_communicator(DeviceKind device, MPI_Comm comm, const std::string& name,
                                                double timeout_s);
// NCCL communicator for the current CUDA device, bootstrapped over `comm` (its rank 0
// creates the ncclUniqueId and broadcasts it). Defined in parallel/nccl/.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const std::string& name, double timeout_s);

// Makes this rank's CUDA device the GPU number (node-local rank % visible GPUs), the
// node-local rank coming from MPI_COMM_TYPE_SHARED (real nodes, whatever
// parallel.ranks_per_node emulates). Collective over MPI_COMM_WORLD. Call it before the
// CUDA backend is first used; returns the device chosen, or -1 (and does nothing)
// when the build has no CUDA backend or the machine no GPU. Defined in parallel/nccl/.
int bind_local_device();

class ProcessGroups {
 public:
  ProcessGroups(const Topology& topo, DeviceKind device, double timeout_s);

  const Topology& topology() const { return topo_; }
  Communicator& world() { return *world_; }
  Communicator& tp() { return *tp_; }
  Communicator& dp() { return *dp_; }

 private:
  Topology topo_;
  std::unique_ptr<Communicator> world_, tp_, dp_;
};

}  // namespace vlm

// ProcessGroups and the communicator factory (see groups.h).
#include "parallel/groups.h"

#include "base/error.h"
#include "parallel/mpi/mpi_check.h"
#include "parallel/mpi/mpi_communicator.h"

namespace vlm {

std::unique_ptr<Communicator> make_communicator(DeviceKind device, MPI_Comm comm, const std::string& name,
                                                double timeout_s) {
  if (device == DeviceKind::CUDA) return make_nccl_communicator(comm, name, timeout_s);
  return std::make_unique<MpiCommunicator>(comm, name, timeout_s);
}

ProcessGroups::ProcessGroups(const Topology& topo, DeviceKind device, double timeout_s) : topo_(topo) {
  const RankPlace me = topo.self();
  MPI_Comm tp_comm = MPI_COMM_NULL, dp_comm = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, me.tp_group, me.tp_rank, &tp_comm));
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, me.dp_group, me.dp_rank, &dp_comm));
  world_ = make_communicator(device, MPI_COMM_WORLD, "world", timeout_s);
  tp_ = make_communicator(device, tp_comm, cat("tp[", me.tp_group, "]"), timeout_s);
  dp_ = make_communicator(device, dp_comm, cat("dp[", me.dp_group, "]"), timeout_s);
  MPI_CHECK(MPI_Comm_free(&tp_comm));
  MPI_CHECK(MPI_Comm_free(&dp_comm));
  VLM_ASSERT(tp_->rank() == me.tp_rank && tp_->size() == topo.tp(), "tp group of rank ", me.rank);
  VLM_ASSERT(dp_->rank() == me.dp_rank && dp_->size() == topo.dp(), "dp group of rank ", me.rank);
}

}  // namespace vlm

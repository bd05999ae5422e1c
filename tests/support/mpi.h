// MPI helpers of the multi-rank tests (binaries built with RANKS, see
// tests/support/CMakeLists.txt, whose main is tests/support/mpi_main.cpp): world rank and
// size, communicators over MPI_COMM_SELF (size 1: no tensor parallelism) and CPU ones over
// MPI_COMM_WORLD, and a scratch folder shared by all ranks.
#pragma once
#include <mpi.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "parallel/groups.h"
#include "tests/support/files.h"

namespace vlm::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
// device CUDA: an NCCL communicator of one rank (for a model on the CUDA backend).
inline std::unique_ptr<Communicator> self_comm(const std::string& name = "tp_self", DeviceKind device = DeviceKind::CPU) {
  return make_communicator(device, MPI_COMM_SELF, name, 120.0);
}
inline std::unique_ptr<Communicator> world_comm(const std::string& name = "tp") {
  return make_communicator(DeviceKind::CPU, MPI_COMM_WORLD, name, 120.0);
}
// scratch_dir(name) named after rank 0's pid, made by rank 0; every rank returns it
// after a barrier.
inline std::string shared_scratch_dir(const std::string& name) {
  int pid = world_rank() == 0 ? int(::getpid()) : 0;
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (world_rank() == 0) scratch_dir(name);
  MPI_Barrier(MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("vlm_test_" + std::to_string(pid) + "_" + name)).string();
}

}  // namespace vlm::test

// MpiCommunicator: the Communicator for host (CPU) tensors over one MPI communicator.
// Every operation is posted as non-blocking MPI (MPI_Iallreduce, MPI_Iallgather,
// MPI_Ireduce_scatter_block, MPI_Ibcast, MPI_Isend/MPI_Irecv, MPI_Ibarrier); wait()
// polls MPI_Test, sleeping between polls (exponential back-off from 10 us to 1 ms, so
// oversubscribed ranks leave the cores to each other) until done or until the
// deadline (post time + timeout_s), where every rank is aborted with the message of
// Communicator::timeout_message.
// Invariants: the MPI communicator is a private duplicate (no traffic mixes with other
// groups); handles must not outlive their communicator; counts fit in an int.
// bf16 reductions go through user-defined MPI operations (f32 arithmetic per step,
// rounded to bf16 after each, as NCCL's).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace vlm {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm` (duplicates it). `name` names the group in messages.
  MpiCommunicator(MPI_Comm comm, std::string name, double timeout_s);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::unique_ptr<Communicator> duplicate(const std::string& name) const override {
    return std::make_unique<MpiCommunicator>(comm_, name, timeout_s());
  }
  MPI_Comm mpi_comm() const { return comm_; }

 protected:
  CommWork post_all_reduce(Stream& s, const Tensor& x, ReduceOp op) override;
  CommWork post_all_gather(Stream& s, const Tensor& out, const Tensor& in) override;
  CommWork post_reduce_scatter(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op) override;
  CommWork post_broadcast(Stream& s, const Tensor& x, int root) override;
  CommWork post_send(Stream& s, const Tensor& x, int peer) override;
  CommWork post_recv(Stream& s, const Tensor& x, int peer) override;
  CommWork post_barrier(Stream& s) override;

 private:
  CommWork track(CollKind kind, MPI_Request req) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace vlm

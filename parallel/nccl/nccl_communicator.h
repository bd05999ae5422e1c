// NcclCommunicator: the Communicator for device (CUDA) tensors of one group.
// Bootstrap: group rank 0 calls ncclGetUniqueId, the id is broadcast over the group's
// MPI communicator, every member calls ncclCommInitRank on its current CUDA device.
// Ordering: each operation runs on the communicator's own high-priority communication
// stream. Posting records an event on the caller's stream and makes the communication
// stream wait for it (the inputs are ready), enqueues the NCCL call, and records a
// completion event; handle.wait() makes the caller's stream wait for that event. The
// host never blocks on the device (no synchronisation inside a step).
// Timeouts: every completion event is watched by an NcclWatchdog (nccl_watchdog.h).
// Barrier: an all-reduce of one int on a device word owned by the communicator.
// Invariants: one device per process (the current device at construction); buffers
// stay alive until the caller's stream has passed the wait; handles do not outlive
// the communicator.
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "parallel/communicator.h"
#include "parallel/nccl/nccl_watchdog.h"

namespace vlm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (used only for the bootstrap).
  NcclCommunicator(MPI_Comm comm, std::string name, double timeout_s);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceKind device() const override { return DeviceKind::CUDA; }
  cudaStream_t comm_stream() const { return stream_; }

 protected:
  CommWork post_all_reduce(Stream& s, const Tensor& x, ReduceOp op) override;
  CommWork post_all_gather(Stream& s, const Tensor& out, const Tensor& in) override;
  CommWork post_reduce_scatter(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op) override;
  CommWork post_broadcast(Stream& s, const Tensor& x, int root) override;
  CommWork post_send(Stream& s, const Tensor& x, int peer) override;
  CommWork post_recv(Stream& s, const Tensor& x, int peer) override;
  CommWork post_barrier(Stream& s) override;

 private:
  // Makes the communication stream wait for the work enqueued so far on `caller`.
  void begin(Stream& caller);
  // Records completion, hands it to the watchdog, returns the handle for `caller`.
  CommWork finish(Stream& caller, CollKind kind);

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int* barrier_word_ = nullptr;  // device int for barrier()
  std::unique_ptr<NcclWatchdog> watchdog_;
};

}  // namespace vlm

// NcclCommunicator: the Communicator for device (CUDA) tensors of one group.
// Bootstrap: group rank 0 calls ncclGetUniqueId, the id is broadcast over the group's
// MPI communicator, every member calls ncclCommInitRank on its current CUDA device.
// Ordering: each operation runs on the communicator's own high-priority communication
// stream. Posting records an event on the caller's stream and makes the communication
// stream wait for it (the inputs are ready), enqueues the NCCL call, and records a
// completion event; handle.wait() makes the caller's stream wait for that event. The
// host never blocks on the device (no synchronisation inside a step).
// Point to point: send/recv are queued and issued together in one ncclGroupStart/End
// (the NCCL rule for p2p patterns that form cycles: a ring of recv_async + send_async
// posted one NCCL call at a time deadlocks, every rank's stream blocked in its recv).
// The queue is issued when a handle of it is waited (or destroyed), when any other
// operation is posted (so the order of NCCL calls stays the call order), or at
// destruction; the caller's inputs are still captured when each is posted.
// Timeouts: every completion event is watched by an NcclWatchdog (nccl_watchdog.h).
// Barrier: an all-reduce of one int on a device word owned by the communicator.
// Duplicates bootstrap over a private duplicate of the MPI communicator.
// Invariants: one device per process (the current device at construction); buffers
// stay alive until the caller's stream has passed the wait; handles do not outlive
// the communicator.
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cuda/cuda_backend.h"
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
  std::unique_ptr<Communicator> duplicate(const std::string& name) const override;
  cudaStream_t comm_stream() const { return stream_; }

  // The queued point-to-point operations (see the file comment) and the batch they
  // complete with; flush_p2p() issues the queue (no-op when empty). Used by the p2p
  // handles.
  struct P2pOp {
    bool send;
    void* buf;
    size_t count;
    ncclDataType_t type;
    int peer;
  };
  struct P2pBatch {
    std::shared_ptr<cuda::CudaEvent> done;  // recorded when the batch is issued
    CollKind kind;                          // the first operation's, for the watchdog
    bool issued = false;
  };
  void flush_p2p();

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
  // Queues one send/recv (after begin(caller)) and returns its handle.
  CommWork post_p2p(Stream& caller, const P2pOp& op, CollKind kind);

  MPI_Comm boot_ = MPI_COMM_NULL;  // the duplicates' bootstrap
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int* barrier_word_ = nullptr;  // device int for barrier()
  std::unique_ptr<NcclWatchdog> watchdog_;
  std::vector<P2pOp> p2p_ops_;           // queued, not yet issued
  std::shared_ptr<P2pBatch> p2p_batch_;  // the batch of p2p_ops_ (null when empty)
};

}  // namespace vlm

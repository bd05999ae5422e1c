// Communicator: the one interface through which every collective of the framework goes
// (docs/architecture.md, "Parallel layout"), for one group of ranks (world, a TP group, a DP group).
// Implementations: MpiCommunicator (parallel/mpi/, host tensors, non-blocking MPI) and
// NcclCommunicator (parallel/nccl/, device tensors, NCCL on a dedicated communication
// stream ordered with events). make_communicator (parallel/groups.h) picks one by device.
//
// Semantics (ranks are group ranks, 0..size()-1; every member must make the same calls
// in the same order with the same shapes and dtypes):
//   all_reduce(x, op)          x = op over ranks of x                       (in place)
//   all_gather(out, in)        out = concat(in_0, ..., in_{size-1})           (rank order,
//                              contiguous blocks: out.numel() == size * in.numel())
//   reduce_scatter(out, in, op) out = block `rank` of op over ranks of in  (in.numel() ==
//                              size * out.numel(); blocks are contiguous, as all_gather's)
//   broadcast(x, root)         x = root's x
//   send(x, peer) / recv(x, peer)  point to point, matched in call order per pair
//   barrier()                  completes when every member has entered it (on CUDA:
//                              later work on the caller's stream waits for that)
// Reductions (all_reduce, reduce_scatter) take f32, f64, i32 or bf16 (bf16: each step
// of the reduction rounds to bf16; the order of the steps is the library's);
// data movement takes any dtype. Tensors must be contiguous, on the communicator's device.
//
// Asynchrony: each `X_async` posts the operation and returns a handle; handle.wait()
// makes the result visible to the stream the call was issued on (CPU: the data is in
// place on return; CUDA: later work on that stream waits for it, the host does not
// block). The blocking `X` is `X_async(...)->wait()`. A handle destroyed without wait()
// waits. Buffers must stay alive and untouched until the wait.
//
// No silent hangs: an operation not complete `timeout_s()` seconds after it was posted
// aborts every rank (MPI_Abort) with a message naming the collective, the group and
// the rank.
//
// Byte counters (per group, per collective kind, counted when the call is posted,
// whatever the group size): bytes[kind] += the size in bytes of the LOCAL INPUT buffer:
//   all_reduce: x.nbytes()            all_gather: in.nbytes()  (= out.nbytes() / size)
//   reduce_scatter: in.nbytes()       (= size * out.nbytes())
//   broadcast: x.nbytes() (on every rank, root or not)
//   send: x.nbytes()                  recv: x.nbytes() (the receive buffer)
//   barrier: 0
// and calls[kind] += 1. So for n elements of dtype size s: all_reduce adds n*s,
// all_gather of an [n] slice adds n*s, reduce_scatter of an [size*n] input adds size*n*s.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

enum class ReduceOp { Sum, Max };

enum class CollKind : int { AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv, Barrier };
inline constexpr int kNumCollKinds = 7;
// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv", "barrier"
const char* coll_name(CollKind k);

struct CommCounters {
  std::array<uint64_t, kNumCollKinds> bytes{};
  std::array<uint64_t, kNumCollKinds> calls{};
  uint64_t bytes_of(CollKind k) const { return bytes[size_t(k)]; }
  uint64_t calls_of(CollKind k) const { return calls[size_t(k)]; }
  uint64_t total_bytes() const;
  std::string str() const;  // "all_reduce 48 B / 2 calls, ..." (kinds with calls only)
  CommCounters& operator+=(const CommCounters& o);  // the bytes and calls of two groups' counters
};

// A posted operation. wait() completes it as seen by the issuing stream (see above);
// it aborts every rank when the operation passes its deadline.
class CommHandle {
 public:
  virtual ~CommHandle() = default;
  virtual void wait() = 0;
};
using CommWork = std::unique_ptr<CommHandle>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual DeviceKind device() const = 0;
  // A second communicator over the same group, named `name` (collective over the group).
  // Operations on the two are not ordered with each other: two streams that post
  // concurrently, each in its own order, each use one (the encoder's ZeRO traffic on the
  // vision stream beside the step's comm stream: optim/dp_grads.h).
  virtual std::unique_ptr<Communicator> duplicate(const std::string& name) const = 0;
  const std::string& name() const { return name_; }  // "world", "tp[1]", "dp[0]"
  int world_rank() const { return world_rank_; }
  double timeout_s() const { return timeout_s_; }

  // Asynchronous forms (validate, count, post).
  CommWork all_reduce_async(Stream& s, const Tensor& x, ReduceOp op = ReduceOp::Sum);
  CommWork all_gather_async(Stream& s, const Tensor& out, const Tensor& in);
  CommWork reduce_scatter_async(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum);
  CommWork broadcast_async(Stream& s, const Tensor& x, int root);
  CommWork send_async(Stream& s, const Tensor& x, int peer);
  CommWork recv_async(Stream& s, const Tensor& x, int peer);
  CommWork barrier_async(Stream& s);

  // Blocking forms: X_async(...)->wait().
  void all_reduce(Stream& s, const Tensor& x, ReduceOp op = ReduceOp::Sum) { all_reduce_async(s, x, op)->wait(); }
  void all_gather(Stream& s, const Tensor& out, const Tensor& in) { all_gather_async(s, out, in)->wait(); }
  void reduce_scatter(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(s, out, in, op)->wait();
  }
  void broadcast(Stream& s, const Tensor& x, int root) { broadcast_async(s, x, root)->wait(); }
  void send(Stream& s, const Tensor& x, int peer) { send_async(s, x, peer)->wait(); }
  void recv(Stream& s, const Tensor& x, int peer) { recv_async(s, x, peer)->wait(); }
  void barrier(Stream& s) { barrier_async(s)->wait(); }

  // A buffer of at least n elements of dtype dt on the group's device, one per slot
  // (0 or 1), grown on demand and kept: the staging of the bf16 wire format of the
  // region ops (parallel/regions.h). Valid until the next call with the same slot.
  Tensor staging(int slot, int64_t n, DType dt);

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = CommCounters{}; }

  // The message printed when `kind` does not complete in time (also used by tests).
  std::string timeout_message(CollKind kind) const;

 protected:
  Communicator(std::string name, int world_rank, double timeout_s);

  // Implementations post the (already validated) operation.
  virtual CommWork post_all_reduce(Stream& s, const Tensor& x, ReduceOp op) = 0;
  virtual CommWork post_all_gather(Stream& s, const Tensor& out, const Tensor& in) = 0;
  virtual CommWork post_reduce_scatter(Stream& s, const Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual CommWork post_broadcast(Stream& s, const Tensor& x, int root) = 0;
  virtual CommWork post_send(Stream& s, const Tensor& x, int peer) = 0;
  virtual CommWork post_recv(Stream& s, const Tensor& x, int peer) = 0;
  virtual CommWork post_barrier(Stream& s) = 0;

 private:
  void check_tensor(CollKind k, Stream& s, const Tensor& t, bool reduction) const;
  void count(CollKind k, size_t bytes);

  std::string name_;
  int world_rank_ = 0;
  double timeout_s_ = 300.0;
  CommCounters counters_;
  std::array<Tensor, 2> staging_;
};

// Every rank's string, on every rank (two all-gathers over `c` on stream s; blocking):
// the trace events of `vlm train --trace`.
std::vector<std::string> all_gather_strings(Communicator& c, Stream& s, const std::string& mine);

// Host values reduced over the group (f64, through a tensor on the group's device, on
// stream s; blocking): loss sums, token counts, metric totals.
std::vector<double> all_reduce_values(Communicator& c, Stream& s, const std::vector<double>& v,
                                      ReduceOp op = ReduceOp::Sum);

}  // namespace vlm

// NcclWatchdog: the "no silent hangs" guard of one NcclCommunicator. NCCL work is
// asynchronous on the communication stream, so the host never blocks on it; instead a
// background thread checks, every kPollMs, the completion event of each posted
// operation (oldest first: one stream completes in order) and NCCL's asynchronous
// error. An operation still pending `timeout_s` after it was posted, or an NCCL
// error, aborts every rank (abort_all_ranks: MPI_Abort, which ends the NCCL work
// with the processes) with the communicator's message naming the collective, the
// group and the rank.
// Invariants: entries are completion events (core Events of the CUDA backend, shared
// with the handles and destroyed with the last owner) recorded on the communication
// stream in post order; the thread only queries and destroys events (on the
// communicator's device), it never enqueues work.
#pragma once
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/backend.h"
#include "parallel/communicator.h"

namespace vlm {

class NcclWatchdog {
 public:
  static constexpr int kPollMs = 50;
  // `owner` provides timeout_s() and timeout_message(); it must outlive the watchdog.
  NcclWatchdog(const Communicator& owner, ncclComm_t comm, int device);
  ~NcclWatchdog();  // stops the thread (pending entries are dropped, not waited for)
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Starts watching `done` (already recorded after the operation `kind`).
  void watch(std::shared_ptr<Event> done, CollKind kind);

 private:
  struct Entry {
    std::shared_ptr<Event> done;
    CollKind kind;
    std::chrono::steady_clock::time_point deadline;
  };
  void run();

  const Communicator& owner_;
  ncclComm_t comm_;
  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace vlm

// DeadlineGuard: the collective timeout for blocking steps that have no deadline of
// their own (MPI_Comm_split, MPI_Comm_dup, the NCCL bootstrap, the agreements of the
// runtime start, parallel/runtime.h). While a guard lives, a background thread waits
// for it; if it is still alive `timeout_s` after its construction, every rank is
// aborted (abort_all_ranks, parallel/mpi/mpi_session.h) with its message.
// The communicators' own operations are guarded by their handles (communicator.h);
// this guard covers what runs outside a communicator.
// Invariants: the thread never touches anything but the guard's state and, on
// expiry, abort_all_ranks (MPI_Abort from another thread, as the NCCL watchdog does).
#pragma once
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace vlm {

class DeadlineGuard {
 public:
  DeadlineGuard(double timeout_s, std::string message);
  ~DeadlineGuard();  // disarms the guard and joins its thread
  DeadlineGuard(const DeadlineGuard&) = delete;
  DeadlineGuard& operator=(const DeadlineGuard&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string message_;
  std::thread thread_;
};

}  // namespace vlm

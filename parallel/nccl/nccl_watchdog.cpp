// NcclWatchdog: polls completion events of posted NCCL work against their deadlines
// (see nccl_watchdog.h).
#include "parallel/nccl/nccl_watchdog.h"

#include "base/error.h"
#include "core/cuda/cuda_check.h"
#include "parallel/mpi/mpi_session.h"

namespace vlm {

NcclWatchdog::NcclWatchdog(const Communicator& owner, ncclComm_t comm, int device)
    : owner_(owner), comm_(comm), device_(device) {
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void NcclWatchdog::watch(std::shared_ptr<Event> done, CollKind kind) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(owner_.timeout_s()));
  std::lock_guard<std::mutex> lk(mu_);
  pending_.push_back(Entry{std::move(done), kind, deadline});
}

void NcclWatchdog::run() {
  CUDA_CHECK(cudaSetDevice(device_));
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::milliseconds(kPollMs), [this] { return stop_; });
    if (stop_) break;
    // The stream completes in order: drop finished entries from the front; the first
    // unfinished one has the earliest deadline.
    // (query() aborts with the CUDA error, should the device have failed.)
    while (!pending_.empty()) {
      const Entry& e = pending_.front();
      if (e.done->query()) {
        pending_.pop_front();
        continue;
      }
      if (std::chrono::steady_clock::now() >= e.deadline) abort_all_ranks(owner_.timeout_message(e.kind).c_str());
      break;
    }
    ncclResult_t async_err = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async_err) == ncclSuccess && async_err != ncclSuccess &&
        async_err != ncclInProgress) {
      const std::string msg = cat("NCCL error on group ", owner_.name(), " (group rank ", owner_.rank(), " of ",
                                  owner_.size(), ", world rank ", owner_.world_rank(),
                                  "): ", ncclGetErrorString(async_err), "; aborting all ranks");
      abort_all_ranks(msg.c_str());
    }
  }
}

}  // namespace vlm

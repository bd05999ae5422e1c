// DeadlineGuard: a thread that aborts every rank unless the guard ends in time (see
// deadline_guard.h).
#include "parallel/deadline_guard.h"

#include <chrono>

#include "parallel/mpi/mpi_session.h"

namespace vlm {

DeadlineGuard::DeadlineGuard(double timeout_s, std::string message) : message_(std::move(message)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                std::chrono::duration<double>(timeout_s));
  thread_ = std::thread([this, deadline] {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_until(lk, deadline, [this] { return done_; })) abort_all_ranks(message_.c_str());
  });
}

DeadlineGuard::~DeadlineGuard() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace vlm

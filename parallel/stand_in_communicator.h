// StandInCommunicator: a group of a layout seen from one of its ranks, for planning
// (train/memory_terms.h plan_rank): constructors that take a communicator only ask its
// size and rank. Any collective is an internal error (planning never communicates).
#pragma once
#include <memory>
#include <string>

#include "base/error.h"
#include "parallel/communicator.h"

namespace vlm {

class StandInCommunicator final : public Communicator {
 public:
  StandInCommunicator(const std::string& name, int size, int rank) : Communicator(name, 0, 1.0), size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::unique_ptr<Communicator> duplicate(const std::string& name) const override {
    return std::make_unique<StandInCommunicator>(name, size_, rank_);
  }

 protected:
  CommWork fail() const {
    VLM_ASSERT(false, "planning communicator ", name(), " asked to communicate");
    return nullptr;
  }
  CommWork post_all_reduce(Stream&, const Tensor&, ReduceOp) override { return fail(); }
  CommWork post_all_gather(Stream&, const Tensor&, const Tensor&) override { return fail(); }
  CommWork post_reduce_scatter(Stream&, const Tensor&, const Tensor&, ReduceOp) override { return fail(); }
  CommWork post_broadcast(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_send(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_recv(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_barrier(Stream&) override { return fail(); }

 private:
  int size_, rank_;
};

}  // namespace vlm

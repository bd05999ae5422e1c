// OutOfMemory: an allocation that could not be made (docs/errors.md, "Out of memory"). Instead
// of a bare std::bad_alloc (or a CUDA error code), the backends throw it with what a
// one-line message needs: the device, the bytes asked and the backend's own account
// (CUDA: the device's free and total memory). Arena::allocate (core/arena.h) adds the
// arena's name, and throws it itself when a host arena is larger than the memory
// available (base/memory_check.h), before asking. The trainer (train/trainer.cpp) turns
// it into the UserError that also names the rank and what `vlm plan` predicts for the
// layout; elsewhere what() is the message (exit 2, parallel/runtime.h).
// Derived from std::bad_alloc: code that catches that still catches it.
// Fault injection (tests): VLM_FAULT_ARENA_ALLOC=<n> makes the n-th allocation of a planned
// arena (Arena::allocate, ParamTable::allocate: nn/param_table.h) of
// the process throw it as if its backend had no memory left (arena_fault_due()).
#pragma once
#include <cstddef>
#include <new>
#include <string>

#include "core/device.h"

namespace vlm {

class OutOfMemory : public std::bad_alloc {
 public:
  // `what_failed`: "arena 'grads' (12 tensors, first 'x')" or "" (an allocation outside an
  // arena); `detail`: the backend's account ("cudaMalloc: 1.2 GiB free of 79.1 GiB").
  OutOfMemory(DeviceKind device, size_t bytes, std::string what_failed, std::string detail);
  // "<what_failed>: out of memory on <device>: needs <bytes> (<detail>)"
  const char* what() const noexcept override { return message_.c_str(); }
  DeviceKind device() const { return device_; }
  size_t bytes() const { return bytes_; }
  const std::string& what_failed() const { return what_failed_; }
  const std::string& detail() const { return detail_; }

 private:
  DeviceKind device_;
  size_t bytes_;
  std::string what_failed_, detail_, message_;
};

// True for the allocation VLM_FAULT_ARENA_ALLOC=<n> names (the n-th call of the process,
// counted from 1); false always when it is unset. Thread-safe.
bool arena_fault_due();

}  // namespace vlm

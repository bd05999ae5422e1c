// CountingBackend: a Backend that forwards everything to another one and counts the
// bytes allocated through it: live bytes now and their peak since construction (or the
// last reset_peak). `vlm train` allocates its model, gradients, optimizer state and DP
// buffers through one, so the peak it reports is measured, not derived from the plan
// (docs/planning.md). Streams and events are the inner backend's.
// Invariants: counts are of the bytes asked for (not the allocator's rounding); the
// counter outlives every tensor allocated through it (tensors keep a pointer to their
// backend); thread-safe (streams' workers may allocate).
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"

namespace vlm {

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : inner_(inner) {}
  ~CountingBackend() override;

  size_t live_bytes() const;
  size_t peak_bytes() const;
  void reset_peak();  // peak = live

  DeviceKind device() const override { return inner_.device(); }
  std::string description() const override { return inner_.description(); }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) override {
    inner_.copy(dst, dst_dev, src, src_dev, bytes);
  }
  void memset_zero(void* p, size_t bytes) override { inner_.memset_zero(p, bytes); }
  Stream& default_stream() override { return inner_.default_stream(); }
  std::unique_ptr<Stream> create_stream(const std::string& name) override { return inner_.create_stream(name); }
  std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& opt) override {
    return inner_.create_async_stream(name, opt);
  }
  std::unique_ptr<Event> create_event(bool timing) override { return inner_.create_event(timing); }
  void synchronize() override { inner_.synchronize(); }
  bool commits_memory() const override { return inner_.commits_memory(); }

 private:
  Backend& inner_;
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_ = 0, peak_ = 0;
};

}  // namespace vlm

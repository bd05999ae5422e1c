// ReservingBackend: a CPU backend that allocates address space without memory, for
// planning (`vlm plan`, train/memory_terms.h plan_rank): anonymous private mappings that
// are never touched (MAP_NORESERVE: no commit charge). Pages a constructor does write (a
// few small tables, the padding columns of the logits) become real; the rest is never
// backed. Fresh mappings read as zero, so zero-filling is skipped. Streams and events
// are the CPU backend's. allocated() counts the bytes asked for, as CountingBackend's.
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"

namespace vlm {

class ReservingBackend final : public Backend {
 public:
  ~ReservingBackend() override;
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string description() const override { return "address space (planning)"; }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void copy(void* dst, DeviceKind dd, const void* src, DeviceKind sd, size_t bytes) override;
  void memset_zero(void*, size_t) override {}  // fresh mappings are zero
  Stream& default_stream() override;
  std::unique_ptr<Stream> create_stream(const std::string& name) override;
  std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& o) override;
  std::unique_ptr<Event> create_event(bool timing) override;
  void synchronize() override {}
  bool commits_memory() const override { return false; }
  size_t allocated() const { return allocated_; }

 private:
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  size_t allocated_ = 0;
};

}  // namespace vlm

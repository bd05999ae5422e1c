// ReservingBackend (core/reserving_backend.h).
#include "core/reserving_backend.h"

#include <sys/mman.h>

#include <algorithm>

#include "base/error.h"
#include "base/memory_check.h"

namespace vlm {

ReservingBackend::~ReservingBackend() { VLM_ASSERT(sizes_.empty(), "planning backend destroyed with live mappings"); }

void* ReservingBackend::allocate(size_t bytes) {
  const size_t n = std::max<size_t>(bytes, 1);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  constexpr size_t kAddressable = size_t(1) << 47;  // 128 TiB: a process's user address space on x86-64
  VLM_REQUIRE(p != MAP_FAILED, "cannot reserve ", format_bytes(double(n)), " of address space to plan an arena",
              n >= kAddressable ? " (more than a process can address: the model's options ask for far more memory "
                                  "than any device has)"
                                : " (vm.overcommit_memory=2 or ulimit -v?)");
  std::lock_guard lock(mu_);
  sizes_[p] = n;
  allocated_ += bytes;
  return p;
}

void ReservingBackend::deallocate(void* p) {
  std::lock_guard lock(mu_);
  auto it = sizes_.find(p);
  VLM_ASSERT(it != sizes_.end(), "planning backend: unknown mapping");
  munmap(p, it->second);
  sizes_.erase(it);
}

void ReservingBackend::copy(void* dst, DeviceKind dd, const void* src, DeviceKind sd, size_t bytes) {
  cpu_backend().copy(dst, dd, src, sd, bytes);
}

Stream& ReservingBackend::default_stream() { return cpu_backend().default_stream(); }

std::unique_ptr<Stream> ReservingBackend::create_stream(const std::string& name) {
  return cpu_backend().create_stream(name);
}

std::unique_ptr<Stream> ReservingBackend::create_async_stream(const std::string& name, const AsyncStreamOptions& o) {
  return cpu_backend().create_async_stream(name, o);
}

std::unique_ptr<Event> ReservingBackend::create_event(bool timing) { return cpu_backend().create_event(timing); }

}  // namespace vlm

// CountingBackend (core/counting_backend.h).
#include "core/counting_backend.h"

#include <algorithm>

#include "base/error.h"

namespace vlm {

CountingBackend::~CountingBackend() = default;

size_t CountingBackend::live_bytes() const {
  std::lock_guard lock(mu_);
  return live_;
}

size_t CountingBackend::peak_bytes() const {
  std::lock_guard lock(mu_);
  return peak_;
}

void CountingBackend::reset_peak() {
  std::lock_guard lock(mu_);
  peak_ = live_;
}

void* CountingBackend::allocate(size_t bytes) {
  void* p = inner_.allocate(bytes);
  std::lock_guard lock(mu_);
  sizes_[p] = bytes;
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return p;
}

void CountingBackend::deallocate(void* p) {
  {
    std::lock_guard lock(mu_);
    auto it = sizes_.find(p);
    VLM_ASSERT(it != sizes_.end(), "CountingBackend: freeing memory it did not allocate");
    live_ -= it->second;
    sizes_.erase(it);
  }
  inner_.deallocate(p);
}

}  // namespace vlm

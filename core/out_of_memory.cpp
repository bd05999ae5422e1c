// OutOfMemory (core/out_of_memory.h).
#include "core/out_of_memory.h"

#include <atomic>
#include <cstdlib>

#include "base/error.h"
#include "base/memory_check.h"

namespace vlm {

OutOfMemory::OutOfMemory(DeviceKind device, size_t bytes, std::string what_failed, std::string detail)
    : device_(device), bytes_(bytes), what_failed_(std::move(what_failed)), detail_(std::move(detail)) {
  message_ = cat(what_failed_.empty() ? std::string("an allocation") : what_failed_, ": out of memory on ",
                 device_name(device_), ": needs ", format_bytes_exact(bytes_),
                 detail_.empty() ? "" : ", ", detail_);
}

bool arena_fault_due() {
  static const long due = [] {
    const char* e = std::getenv("VLM_FAULT_ARENA_ALLOC");
    return e ? std::atol(e) : 0L;
  }();
  static std::atomic<long> calls{0};
  return due > 0 && ++calls == due;
}

}  // namespace vlm

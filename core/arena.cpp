// Arena (see arena.h): plan named tensors, allocate once, hand out views.
#include "core/arena.h"

#include "base/memory_check.h"
#include "core/out_of_memory.h"

namespace vlm {

static constexpr size_t kAlign = 256;

void Arena::add(const std::string& name, Shape shape, DType dtype) {
  VLM_ASSERT(!allocated(), "arena '", name_, "': add('", name, "') after allocate()");
  VLM_ASSERT(!has(name), "arena '", name_, "': duplicate tensor '", name, "'");
  size_t offset = (bytes_ + kAlign - 1) / kAlign * kAlign;
  index_[name] = entries_.size();
  entries_.push_back({name, shape, dtype, offset});
  bytes_ = offset + size_t(shape.numel()) * dtype_size(dtype);
}

void Arena::allocate(Backend& b, bool zero) {
  VLM_ASSERT(!allocated(), "arena '", name_, "' allocated twice");
  const std::string label =
      cat("arena '", name_, "' (", entries_.size(), " tensors, first '", entries_.empty() ? "" : entries_[0].name, "')");
  // Host memory: sizes come from configs and files, so too much is the user's problem.
  if (b.device() == DeviceKind::CPU && b.commits_memory()) {
    const uint64_t avail = allocatable_bytes();
    if (bytes_ > avail)
      throw OutOfMemory(b.device(), bytes_, label,
                        cat("more than the ", format_bytes(double(avail)), " of memory available"));
  }
  if (arena_fault_due()) throw OutOfMemory(b.device(), bytes_, label, "injected: VLM_FAULT_ARENA_ALLOC");
  try {
    storage_ = Tensor::empty(b, Shape{int64_t(bytes_)}, DType::U8);
  } catch (const OutOfMemory& e) {  // the backend's account, with the arena's name
    throw OutOfMemory(e.device(), bytes_, label, e.detail());
  }
  backend_ = &b;
  if (zero) this->zero();
}

Tensor Arena::get(const std::string& name) const {
  auto it = index_.find(name);
  VLM_ASSERT(it != index_.end(), "arena '", name_, "' has no tensor '", name, "'");
  VLM_ASSERT(allocated(), "arena '", name_, "' not allocated");
  const Entry& e = entries_[it->second];
  Tensor bytes = storage_.sub(int64_t(e.offset), Shape{int64_t(e.shape.numel() * dtype_size(e.dtype))});
  return bytes.reinterpret(e.dtype, e.shape);
}

void Arena::zero() {
  if (allocated() && bytes_) backend_->memset_zero(storage_.data(), bytes_);
}

}  // namespace vlm

// Arena: one allocation holding many named tensors (parameters, gradients,
// activations). Plan first (add), allocate once, then take views by name. Each view is
// 256-byte aligned; the arena's storage lives as long as any view of it.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

class Arena {
 public:
  struct Entry {
    std::string name;
    Shape shape;
    DType dtype;
    size_t offset;  // bytes from the arena start
  };

  explicit Arena(std::string name = "arena") : name_(std::move(name)) {}

  // Reserves a tensor (before allocate()); a duplicate name is an internal error.
  void add(const std::string& name, Shape shape, DType dtype = DType::F32);
  // One allocation of bytes() on `b`; zero-filled when `zero`.
  void allocate(Backend& b, bool zero = true);
  bool allocated() const { return storage_.defined(); }
  // The whole allocation (u8 [bytes()]; padding between views is zero after zero()).
  const Tensor& storage() const { return storage_; }

  Tensor get(const std::string& name) const;  // aborts if unknown or not allocated
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const std::vector<Entry>& entries() const { return entries_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  void zero();  // zero-fills the whole arena

 private:
  std::string name_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  size_t bytes_ = 0;
  Tensor storage_;  // u8[bytes_]
  Backend* backend_ = nullptr;
};

}  // namespace vlm

// The contract of every op, checked once, before a backend runs (docs/architecture.md,
// "Core"). For each entry `foo` of the op table (core/ops/ops_all.inc) this header
// declares the check contract::foo, defined in core/ops/contract_<family>.cpp next to
// the family's .inc: the op's parameters after an `Op` (the op's name and device)
// instead of the Stream. dispatch.cpp calls it before routing to cpu:: or cuda::, so a
// backend may take its arguments as checked:
//  - every tensor defined (unless the declaration says it may be undefined) and on the
//    op's device (a host operand on the CPU);
//  - dtypes: each operand's dtype is one the op's kernels take on the op's device
//    (`Kernels`: one set per backend), the other operands' dtypes follow from it;
//  - shapes, aliasing (e.g. copy: no partial overlap) and scalar ranges (strides,
//    offsets, theta, step).
// A broken contract is an internal error (VLM_ASSERT: the caller's code is wrong, not
// the user's input); the message names the op and the operand, the same on both
// backends. What stays in a backend: limits of its device (cuDNN's int dimensions,
// shared memory, grid sizes) and checks of values only it can read (the CPU ops check
// cu_seqlens, targets and cache rows as they read them).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/ops.h"

namespace vlm::contract {

// A set of dtypes.
class DTypes {
 public:
  constexpr DTypes(std::initializer_list<DType> ts) {
    for (DType t : ts) bits_ |= 1u << unsigned(t);
  }
  constexpr bool has(DType t) const { return (bits_ >> unsigned(t)) & 1u; }
  std::string str() const;  // "f32/f64"

 private:
  unsigned bits_ = 0;
};

// The dtypes an operand takes on each backend: what the backends' kernels are built for.
struct Kernels {
  DTypes cpu, cuda;
  constexpr const DTypes& on(DeviceKind d) const { return d == DeviceKind::CPU ? cpu : cuda; }
};

// The float ops (core/ops.h, Conventions): f32 on both backends, f64 also on the CPU
// (the gradient checks run in f64). A dtype variant of an op (a bf16 kernel, say)
// passes its own Kernels where it checks that operand.
inline constexpr Kernels kFloat{{DType::F32, DType::F64}, {DType::F32}};
// f32 on both backends (round_bf16).
inline constexpr Kernels kF32{{DType::F32}, {DType::F32}};

// One call being checked: the op's name (the first word of every message) and the
// device its stream runs on. Each check aborts with a message naming the op and `what`.
struct Op {
  const char* name;
  DeviceKind device;

  // t is defined and on the op's device.
  void on_device(const Tensor& t, const char* what) const;
  // t is defined and a host (CPU) tensor.
  void on_host(const Tensor& t, const char* what) const;
  // on_device, with a dtype the op's kernels take there: "<op>: <what>: unsupported
  // dtype i32 on cpu (f32/f64)".
  void dtype(const Tensor& t, const char* what, const Kernels& k = kFloat) const;
  // on_device, with the dtype and shape of ref.
  void same(const Tensor& t, const Tensor& ref, const char* what) const;
  // on_device, of dtype dt with n elements.
  void elems(const Tensor& t, DType dt, int64_t n, const char* what) const;
  // A per-row statistic (mean, rstd, lse, losses, ...): n elements, f32 (or f64 on a
  // device with f64 kernels, so the gradient checks are exact).
  void stat(const Tensor& t, int64_t n, const char* what) const;
  // t and u share no byte (either may be empty).
  void disjoint(const Tensor& t, const char* t_what, const Tensor& u, const char* u_what) const;
};

// The checks, one per op, generated from the op table.
#define VLM_CONTRACT_TAIL(first, ...) __VA_ARGS__
#define VLM_OP(name, params, args) void name(const Op& op, VLM_CONTRACT_TAIL params);
#include "core/ops/ops_all.inc"
#undef VLM_OP

}  // namespace vlm::contract

// bf16 activations on CUDA through f32 staging (docs/gpu.md, "bf16 activations"): an op
// whose CUDA kernel reads and writes f32 takes bf16 tensors by converting each bf16
// operand into an f32 copy in the stream's stage buffer (CudaStream::stage_scratch, one
// op at a time, apart from the ops' scratch()), running
// the f32 kernel on the copies, then rounding the copies of the written operands back
// into their bf16 tensors: the f32 op rounded once, as on the CPU. Operands that share
// memory (in place: out == in) share one copy. f32 and undefined operands pass through.
// Not a native bf16 kernel: it moves each bf16 operand three times instead of once.
#pragma once
#include <functional>
#include <initializer_list>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm::cuda {

struct Staged {
  const Tensor* t;
  bool written;  // an output (or in-out): rounded back after the op
};

// True when any operand is bf16 (the op then runs staged).
bool any_bf16(std::initializer_list<const Tensor*> ts);

// Runs op(views) with views[i] the f32 copy of operands[i] (or the operand itself).
void run_staged(Stream& s, std::initializer_list<Staged> operands,
                const std::function<void(const std::vector<Tensor>&)>& op);

}  // namespace vlm::cuda

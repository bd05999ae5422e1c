// The op library: every op the model needs, each with forward and backward, declared
// once here and implemented in core/cpu/ and core/cuda/ with the same names.
//
// The op table (core/ops/ops_all.inc: one VLM_OP entry per op, by family in
// core/ops/<family>.inc) is expanded three times here: in namespace vlm (the public op)
// and in vlm::cpu and vlm::cuda (the implementations). So a signature is written once.
// A public op checks its contract first, once for both backends (contract::<op>,
// core/ops/contract.h), then core/ops/dispatch.cpp routes it by stream.device(). Adding
// an op: (docs/architecture.md, "Core").
//
// Conventions (for every op):
//  - First argument: the Stream the op runs on; every tensor must live on its device.
//  - Outputs first, then inputs. Tensors are contiguous row-major views.
//  - Activation gradients are OVERWRITTEN (=); parameter gradients ACCUMULATE (+=),
//    so micro-batches and tied weights add up. Exceptions are named in the comment.
//  - Dtypes: f32 on both backends; f64 also on CPU (for gradient checks); matmul also
//    takes bf16 A/B. A dtype an op does not take on a device is an internal error.
//  - A broken contract (dtype, shape, device, aliasing, range) is an internal error
//    (VLM_ASSERT naming the op and the operand), raised before any backend runs.
//  - Dimension letters: B batch, T tokens (packed), C channels, NH heads, NKV kv heads,
//    HS head size, V vocabulary, N rows, K inner dim.
#pragma once
#include <array>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

// Options of matmul: C = alpha * op(A) @ op(B) + beta * C (+ bias) (-> gelu).
struct GemmOpts {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.f;
  float beta = 0.f;
  const Tensor* bias = nullptr;  // [N], added to every row of C (epilogue)
  bool gelu = false;             // apply tanh-GELU after bias (epilogue)
  const Tensor* pre_gelu = nullptr;  // when gelu: receives the value before GELU (for backward)
};

// Options of adamw_step. Bias correction uses `step` (1-based).
struct AdamWOpts {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  float grad_scale = 1.f;  // gradients are multiplied by this first (clipping, 1/accum)
  int step = 1;
};

// Options of image_to_patches: pixel v (u8) becomes (v * scale - mean[c]) / stddev[c] for
// channel c (RGB); the defaults are SigLIP's (rescale to [0,1], then mean 0.5, std 0.5).
struct PixelNorm {
  float scale = 1.f / 255.f;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> stddev{0.5f, 0.5f, 0.5f};
};

#define VLM_OP(name, params, args) void name params;
#include "core/ops/ops_all.inc"
namespace cpu {
#include "core/ops/ops_all.inc"
}
namespace cuda {
#include "core/ops/ops_all.inc"
}
#undef VLM_OP

// The name of every public op, in table order (tests/core/test_conformance.cpp checks
// that each has a conformance case).
const std::vector<std::string_view>& op_names();

}  // namespace vlm

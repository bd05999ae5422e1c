// Helpers shared by the CUDA op files (core/cuda/*.cu), not a public header:
//  - typed device pointers (f32p, i32p, bf16p) and activation operands of either float
//    type (Act: f32 or bf16, read and written as f32, one or four elements at a time:
//    ld4/st4 where vec4_ok; rows of W-element Lanes where rows_by_four); the ops'
//    arguments arrive checked (core/ops/contract.h), so a kernel file checks only its
//    device's own limits;
//  - launch sizes: grid-stride loops over int64 element counts (grid_1d), kThreads;
//  - warp and block reductions (sum, max) in f32; block reductions need blockDim.x to be
//    a multiple of 32 and are called by every thread of the block;
//  - the tanh GELU of GPT-2 and its derivative, in f32 (same formula as core/cpu/).
// Every kernel launch is followed by CUDA_CHECK_LAUNCH(); a launch with zero work is
// skipped by the caller (a grid of size 0 is a launch error).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <initializer_list>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/ops.h"

namespace vlm::cuda {

inline constexpr int kThreads = 256;

// ---- pointers (host) -----------------------------------------------------------------

inline float* f32p(const Tensor& t) { return t.ptr<float>(); }
inline int32_t* i32p(const Tensor& t) { return t.ptr<int32_t>(); }
inline __nv_bfloat16* bf16p(const Tensor& t) {
  VLM_ASSERT(t.dtype() == DType::BF16, "tensor is ", t.str(), ", accessed as bf16");
  return static_cast<__nv_bfloat16*>(t.data());
}

// ---- activation operands: f32 or bf16 ----------------------------------------------------

// An activation array in f32 or bf16, chosen per tensor at launch and read and written as
// f32 in the kernel: a bf16 load widens exactly, a bf16 store rounds to nearest even once
// (the ops' bf16 contract, docs/ops.md "Mixed precision": read bf16, compute in f32, round
// the result once). Null (p == nullptr) for an undefined tensor.
struct Act {
  void* p = nullptr;
  bool bf16 = false;
  __device__ __forceinline__ float ld(int64_t i) const {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
  }
  __device__ __forceinline__ void st(int64_t i, float v) const {
    if (bf16)
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else
      static_cast<float*>(p)[i] = v;
  }
  // Elements i .. i+3 (i a multiple of 4, p 16-byte aligned: vec4_ok) in one 16-byte
  // (f32) or 8-byte (bf16) access; the same values as four ld / st.
  __device__ __forceinline__ float4 ld4(int64_t i) const {
    if (!bf16) return static_cast<const float4*>(p)[i / 4];
    const uint2 r = static_cast<const uint2*>(p)[i / 4];
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
    return make_float4(a.x, a.y, b.x, b.y);
  }
  __device__ __forceinline__ void st4(int64_t i, float4 v) const {
    if (!bf16) {
      static_cast<float4*>(p)[i / 4] = v;
      return;
    }
    const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 r;
    r.x = *reinterpret_cast<const unsigned*>(&a);
    r.y = *reinterpret_cast<const unsigned*>(&b);
    static_cast<uint2*>(p)[i / 4] = r;
  }
  __host__ __device__ explicit operator bool() const { return p != nullptr; }
};
inline Act act(const Tensor& t) {
  if (!t.defined()) return {};
  VLM_ASSERT(t.dtype() == DType::F32 || t.dtype() == DType::BF16, "tensor is ", t.str(), ", used as f32 or bf16");
  return Act{t.data(), t.dtype() == DType::BF16};
}
// Whether ld4 / st4 may serve every operand (null ones are ignored): each 16-byte aligned.
inline bool vec4_ok(std::initializer_list<Act> ops) {
  for (const Act& a : ops)
    if (a.p && (reinterpret_cast<uintptr_t>(a.p) & 15u) != 0) return false;
  return true;
}
// The four-wide part of n elements (n / 4 groups) when every operand allows ld4 / st4,
// else 0: a kernel takes the groups four at a time and the rest one at a time.
inline int64_t quads(int64_t n, std::initializer_list<Act> ops) { return vec4_ok(ops) ? n / 4 : 0; }

// Whether kernels over rows of C elements may take four at a time (Lanes<4>): C a
// multiple of 4 and every operand 16-byte aligned (then so is every row).
inline bool rows_by_four(int64_t C, std::initializer_list<Act> ops) { return C % 4 == 0 && vec4_ok(ops); }

// W consecutive elements of an operand from i (W = 4: one ld4/st4, i a multiple of 4).
template <int W>
struct Lanes {
  float v[W];
};
template <int W>
__device__ __forceinline__ Lanes<W> load(const Act& a, int64_t i) {
  Lanes<W> r;
  if constexpr (W == 4) {
    const float4 q = a.ld4(i);
    r.v[0] = q.x, r.v[1] = q.y, r.v[2] = q.z, r.v[3] = q.w;
  } else {
    r.v[0] = a.ld(i);
  }
  return r;
}
template <int W>
__device__ __forceinline__ void store(const Act& a, int64_t i, const Lanes<W>& r) {
  if constexpr (W == 4)
    a.st4(i, make_float4(r.v[0], r.v[1], r.v[2], r.v[3]));
  else
    a.st(i, r.v[0]);
}

// ---- launch sizes ---------------------------------------------------------------------

// Blocks for a grid-stride loop over n elements (n > 0): enough to fill any GPU, capped
// so the grid stays small for huge n (the loop covers the rest).
inline unsigned grid_1d(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return unsigned(std::min<int64_t>(std::max<int64_t>(blocks, 1), int64_t(1) << 16));
}

#define VLM_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// ---- reductions (device) --------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of v over the block, returned to every thread. The leading barrier makes repeated
// calls safe (the shared slots of the previous call have been read by then).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float slots[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  return warp_sum(lane < nwarps ? slots[lane] : 0.f);
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float slots[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  return warp_max(lane < nwarps ? slots[lane] : -INFINITY);
}

// ---- GELU (tanh approximation, GPT-2) ------------------------------------------------

inline constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluC = 0.044715f;

__device__ __forceinline__ float gelu_f(float x) {
  return 0.5f * x * (1.f + tanhf(kGeluK * (x + kGeluC * x * x * x)));
}

__device__ __forceinline__ float gelu_grad_f(float x) {
  const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x);
}

}  // namespace vlm::cuda

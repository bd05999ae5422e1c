// CPU GEMM (core/ops/gemm.inc): matmul through OpenBLAS cblas_sgemm / cblas_dgemm, and
// bias_backward.
//  - 2-D: C[M,N] = alpha op(A) op(B) + beta C; batched: 3-D operands share the leading
//    batch size, a 2-D A or B is broadcast over the batch (C must then be 3-D), one BLAS
//    call per batch entry.
//  - Epilogue per row of C: + bias[N], then pre_gelu = C (if given), C = gelu(C)
//    (f32 GELU through the 4-lane vec_math.h kernel).
//  - beta == 0 never reads C (BLAS overwrites it; K == 0 zeroes it), so NaN garbage
//    cannot leak in.
//  - Mixed precision (A or B bf16, C f32): both operands are copied as f32 holding
//    their bf16 values (an f32 operand is rounded to bf16), then the f32 GEMM runs. A
//    product of two bf16 values is exact in f32, so this is a bf16 GEMM with f32
//    accumulation, as cuBLASLt's on the GPU (up to the order of the sums).
// Deterministic: a GEMM is split between threads by output blocks, never over K
// (blas.h); bias_backward sums the rows of each column in row order.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"
#include "core/cpu/vec_math.h"
#include "core/ops.h"
#include "core/ops/gemm_shape.h"

namespace vlm::cpu {
namespace {

template <typename T>
void matmul_impl(const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  const GemmShape g = gemm_shape(C, A, B, o);
  const int64_t M = g.M, N = g.N, K = g.K, nb = g.batch;
  const T* pa = A.ptr<T>();
  const T* pb = B.ptr<T>();
  T* pc = C.ptr<T>();
  const int64_t sa = g.stride_a, sb = g.stride_b, sc = g.stride_c;
  // beta == 0: BLAS overwrites C without reading it (BLAS contract); only K == 0, done by
  // hand below, needs C zeroed first.
  if (o.beta == 0.f && K == 0) std::memset(static_cast<void*>(pc), 0, C.nbytes());
  for (int64_t i = 0; i < nb; ++i) {
    if (M == 0 || N == 0) break;
    if (K == 0) {  // BLAS may return early: apply beta by hand
      for (int64_t j = 0; j < sc; ++j) pc[i * sc + j] *= T(o.beta);
      continue;
    }
    blas_gemm(o.trans_a, o.trans_b, M, N, K, o.alpha, pa + i * sa, pb + i * sb, o.beta, pc + i * sc);
  }
  if (!o.bias && !o.gelu) return;
  const T* bias = nullptr;
  if (o.bias) bias = o.bias->ptr<T>();
  T* pre = nullptr;
  if (o.gelu && o.pre_gelu) pre = o.pre_gelu->ptr<T>();
  const int64_t rows = nb * M;
  parallel_for(rows, row_grain(N, o.gelu ? kGrainMath : kGrainStream), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* row = pc + r * N;
      if (bias)
        for (int64_t j = 0; j < N; ++j) row[j] += bias[j];
      if (!o.gelu) continue;
      if (pre) std::copy(row, row + N, pre + r * N);
      if constexpr (std::is_same_v<T, float>)
        gelu_f32(row, row, N);  // vectorised (vec_math.h)
      else
        for (int64_t j = 0; j < N; ++j) row[j] = gelu_tanh(row[j]);
    }
  });
}

template <typename T>
void bias_backward_impl(const Tensor& dbias, const Tensor& dout) {
  const int64_t N = dout.cols(), R = dout.rows();
  const T* g = dout.ptr<T>();
  T* db = dbias.ptr<T>();
  // Column blocks in parallel; inside a block rows are summed in order (fixed order).
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (N + kBlock - 1) / kBlock;
  parallel_for(nblocks, row_grain(R * kBlock, kGrainStream), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t j0 = blk * kBlock, j1 = std::min(N, j0 + kBlock);
      T acc[kBlock] = {};
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g[r * N + j];
      for (int64_t j = j0; j < j1; ++j) db[j] += acc[j - j0];
    }
  });
}

// An f32 copy of t (f32 or bf16) holding bf16 values, in this thread's scratch `slot`.
Tensor bf16_values_f32(const Tensor& t, int slot) {
  const int64_t n = t.numel();
  float* d = thread_scratch<float>(slot, n);
  if (t.dtype() == DType::BF16) {
    const bf16* p = t.ptr<bf16>();
    parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = bf16_to_f32(p[i]);
    });
  } else {  // f32 (the contract: core/ops/contract_gemm.cpp)
    const float* p = t.ptr<float>();
    parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = bf16_to_f32(f32_to_bf16(p[i]));
    });
  }
  return Tensor(d, t.shape(), DType::F32, DeviceKind::CPU);
}

}  // namespace

void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  if (A.dtype() == DType::BF16 || B.dtype() == DType::BF16) {  // mixed precision (file comment), C f32
    // Slots 0 and 3 of this thread (cpu_util.h); the BLAS tasks use no scratch.
    const Tensor a = bf16_values_f32(A, 0), b = bf16_values_f32(B, 3);
    matmul_impl<float>(C, a, b, o);
    return;
  }
  dispatch_float(C.dtype(), "matmul", [&](auto tag) { matmul_impl<decltype(tag)>(C, A, B, o); });
}

void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) {
  dispatch_float(dout.dtype(), "bias_backward", [&](auto tag) { bias_backward_impl<decltype(tag)>(dbias, dout); });
}

}  // namespace vlm::cpu

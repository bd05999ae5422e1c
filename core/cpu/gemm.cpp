// CPU GEMM (core/ops/gemm.inc): matmul through OpenBLAS cblas_sgemm / cblas_dgemm, and
// bias_backward.
//  - 2-D: C[M,N] = alpha op(A) op(B) + beta C; batched: 3-D operands share the leading
//    batch size, a 2-D A or B is broadcast over the batch (C must then be 3-D), one BLAS
//    call per batch entry.
//  - Epilogue per row of C: + bias[N], then pre_gelu = C (if given), C = gelu(C)
//    (f32 GELU through the 4-lane vec_math.h kernel); or C *= gelu'(dgelu_pre), the
//    same kernel as gelu_backward, so the fused op equals matmul then gelu_backward.
//  - beta == 0 never reads C (BLAS overwrites it; K == 0 zeroes it), so NaN garbage
//    cannot leak in.
//  - Mixed precision (A or B bf16; an f32 operand is rounded to bf16): on a CPU with
//    AVX512_BF16, the bf16 operands go to the bf16 kernel (blas.h, gemm_bf16.h:
//    vdpbf16ps, f32 sums); elsewhere both are copied as f32 holding their bf16 values
//    and the f32 GEMM runs. A product of two bf16 values is exact in f32, so either is a
//    bf16 GEMM with f32 accumulation, as cuBLASLt's on the GPU (up to the order of the
//    sums, which differs between the two paths). A bf16 C (A and B bf16) is that GEMM
//    into an f32 copy of C (read only when beta != 0), epilogue included (pre_gelu too;
//    dgelu_pre read widened; the bias as bf16 values, core/ops/gemm.inc), rounded once
//    into C.
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

// The products of every batch entry: C = alpha op(A) op(B) + beta C, A and B of element
// type TA (T, or bf16 on the bf16 units), C of T.
template <typename T, typename TA>
void batched_gemm(const GemmShape& g, const TA* pa, const TA* pb, T* pc, const GemmOpts& o, size_t c_bytes) {
  const int64_t M = g.M, N = g.N, K = g.K, nb = g.batch;
  const int64_t sa = g.stride_a, sb = g.stride_b, sc = g.stride_c;
  // beta == 0: BLAS overwrites C without reading it (BLAS contract); only K == 0, done by
  // hand below, needs C zeroed first.
  if (o.beta == 0.f && K == 0) std::memset(static_cast<void*>(pc), 0, c_bytes);
  for (int64_t i = 0; i < nb; ++i) {
    if (M == 0 || N == 0) break;
    if (K == 0) {  // BLAS may return early: apply beta by hand
      for (int64_t j = 0; j < sc; ++j) pc[i * sc + j] *= T(o.beta);
      continue;
    }
    gemm_ld(o.trans_a, o.trans_b, M, N, K, o.alpha, pa + i * sa, o.trans_a ? M : K, pb + i * sb, o.trans_b ? K : N,
            o.beta, pc + i * sc, N);
  }
}

// + bias, then GELU (keeping pre_gelu), on every row of C; or C *= gelu'(dgelu_pre).
template <typename T>
void epilogue(const Tensor& C, const GemmShape& g, const GemmOpts& o) {
  const int64_t N = g.N, nb = g.batch, M = g.M;
  T* pc = C.ptr<T>();
  if (o.dgelu_pre) {  // C *= gelu'(dgelu_pre): gelu_backward's kernel
    const T* x = o.dgelu_pre->ptr<T>();
    parallel_for(nb * M, row_grain(N, kGrainMath), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* row = pc + r * N;
        if constexpr (std::is_same_v<T, float>)
          gelu_grad_f32(row, x + r * N, row, N);
        else
          for (int64_t j = 0; j < N; ++j) row[j] *= gelu_tanh_grad(x[r * N + j]);
      }
    });
    return;
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
void matmul_impl(const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  const GemmShape g = gemm_shape(C, A, B, o);
  batched_gemm<T>(g, A.ptr<T>(), B.ptr<T>(), C.ptr<T>(), o, C.nbytes());
  epilogue<T>(C, g, o);
}

template <typename S>
void bias_backward_impl(const Tensor& dbias, const Tensor& dout) {
  using T = compute_t<S>;
  const int64_t N = dout.cols(), R = dout.rows();
  const S* g = dout.ptr<S>();
  T* db = dbias.ptr<T>();
  // Column blocks in parallel; inside a block rows are summed in order (fixed order).
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (N + kBlock - 1) / kBlock;
  parallel_for(nblocks, row_grain(R * kBlock, kGrainStream), [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t j0 = blk * kBlock, j1 = std::min(N, j0 + kBlock);
      T acc[kBlock] = {};
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += ld(g[r * N + j]);
      for (int64_t j = j0; j < j1; ++j) db[j] += acc[j - j0];
    }
  });
}

// An f32 view of scratch `slot` of this thread shaped like t.
Tensor f32_scratch(const Tensor& t, int slot) {
  return Tensor(thread_scratch<float>(slot, t.numel()), t.shape(), DType::F32, DeviceKind::CPU);
}

// f32 values of the bf16 tensor t into the f32 tensor d, or back (rounded) when to_bf16.
void bf16_f32(const Tensor& f, const Tensor& h, bool to_bf16) {
  float* pf = f.ptr<float>();
  bf16* ph = h.ptr<bf16>();
  parallel_for(f.numel(), kGrainStream, [&](int64_t b, int64_t e) {
    if (to_bf16)
      st_n(ph + b, pf + b, e - b);
    else
      ld_n(pf + b, ph + b, e - b);
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

// t (f32 or bf16) as bf16: t's own data when bf16, else a rounded copy in this thread's
// scratch `slot`.
const bf16* bf16_operand(const Tensor& t, int slot) {
  if (t.dtype() == DType::BF16) return t.ptr<bf16>();
  VLM_ASSERT(t.dtype() == DType::F32, "matmul: mixed-precision operand ", t.str(), " (f32 or bf16)");
  const int64_t n = t.numel();
  bf16* d = thread_scratch<bf16>(slot, n);
  const float* p = t.ptr<float>();
  parallel_for(n, kGrainStream, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = f32_to_bf16(p[i]);
  });
  return d;
}

}  // namespace

void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  if (A.dtype() == DType::BF16 || B.dtype() == DType::BF16) {  // mixed precision (file comment)
    // Slots 0 and 3 of this thread hold the operands, 4 and 5 a bf16 C's f32 copy and its
    // pre_gelu's, 6 its bias's bf16 values (cpu_util.h); the BLAS tasks use no scratch,
    // the bf16 kernel slots 1, 2.
    Tensor c = C, pre, dpre, bias;
    GemmOpts of = o;
    if (C.dtype() == DType::BF16) {
      c = f32_scratch(C, 4);
      if (o.bias) {
        bias = bf16_values_f32(*o.bias, 6);
        of.bias = &bias;
      }
      if (o.beta != 0.f) bf16_f32(c, C, false);
      if (o.gelu && o.pre_gelu) {
        pre = f32_scratch(*o.pre_gelu, 5);
        of.pre_gelu = &pre;
      }
      if (o.dgelu_pre) {  // the saved GELU input, widened: the product's f32 sums times gelu', rounded once
        dpre = f32_scratch(*o.dgelu_pre, 5);
        bf16_f32(dpre, *o.dgelu_pre, false);
        of.dgelu_pre = &dpre;
      }
    }
    if (gemm_bf16_units()) {
      const GemmShape g = gemm_shape(c, A, B, of);
      const bf16* a = bf16_operand(A, 0);
      const bf16* b = bf16_operand(B, 3);
      batched_gemm<float>(g, a, b, c.ptr<float>(), of, c.nbytes());
      epilogue<float>(c, g, of);
    } else {
      matmul_impl<float>(c, bf16_values_f32(A, 0), bf16_values_f32(B, 3), of);
    }
    if (C.dtype() == DType::BF16) {
      bf16_f32(c, C, true);
      if (pre.defined()) bf16_f32(pre, *o.pre_gelu, true);
    }
    return;
  }
  dispatch_float(C.dtype(), "matmul", [&](auto tag) { matmul_impl<decltype(tag)>(C, A, B, o); });
}

void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) {
  dispatch_act(dout.dtype(), "bias_backward", [&](auto tag) { bias_backward_impl<decltype(tag)>(dbias, dout); });
}

}  // namespace vlm::cpu

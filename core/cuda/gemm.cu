// CUDA GEMM (core/ops/gemm.inc): matmul through cuBLASLt, and bias_backward.
//  - Row-major through column-major cuBLASLt: a row-major X[r,c] is a column-major
//    X^T[c,r], so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, i.e. cuBLASLt's
//    "A" is our B and its "B" is our A, with m = N, n = M (no copies, no transposes).
//  - Batched: strided batches; a 2-D operand is broadcast with batch stride 0. The
//    common case A[b,M,K] x B[K,N] (no trans_a) is folded into one 2-D GEMM of b*M rows.
//  - Types: f32 compute (CUBLAS_COMPUTE_32F) with A/B f32 -> C f32 (exact f32, no TF32),
//    or A/B bf16 -> C f32 or bf16 straight from the bf16 operands (tensor cores, f32
//    accumulation; a weight gradient accumulates into its f32 gradient with beta = 1).
//    Mixed (one of A/B bf16, the other f32; C f32): the f32 operand goes to bf16 in
//    chunks of rows through the stream's scratch (at most kCastChunkBytes each), one
//    bf16 GEMM per chunk (along M or N: the chunk's rows of C; along K: accumulated
//    into C), so no buffer grows with the operand.
//  - Plans: every cuBLASLt call goes through lt_matmul (core/cuda/gemm_plan.h), which
//    builds a call's descriptors and algorithm once per GemmKey and caches them.
//  - Epilogues: bias -> BIAS, bias+gelu -> GELU_BIAS, with pre_gelu -> GELU_AUX_BIAS
//    (cuBLASLt's GELU is the tanh approximation, as ours), dgelu_pre -> DGELU (C times
//    the GELU derivative at the saved input). Used where cuBLASLt documents the
//    combination: the aux of C's dtype with its leading dimension divisible by 8; the
//    bias of C's dtype (cuBLASLt reads it in D's type and refuses an f32 bias on a bf16
//    D: for a bf16 C, matmul first rounds an f32 bias into the front of the stream's
//    scratch, as core/ops/gemm.inc specifies); bias and aux 16-byte aligned (no
//    preference tells the heuristic about them). Otherwise, or when
//    cuBLASLt finds no algorithm or refuses it (INVALID_VALUE), a plain GEMM is followed
//    by our epilogue kernel; for a bf16 C the plain GEMM writes f32 chunks of the scratch
//    and the epilogue rounds once (gemm_f32_then_epilogue).
//  - beta == 0 never reads C (BLAS semantics), so garbage in C cannot leak in.
//  - bias_backward: a deterministic column-sum kernel (no atomics), dbias (f32) += the
//    column sums of dout (f32 or bf16, read natively), in f32.
#include <bit>
#include <cstdint>

#include "core/cuda/cuda_util.cuh"
#include "core/cuda/gemm_plan.h"
#include "core/gemm_key.h"
#include "core/ops/gemm_shape.h"

namespace vlm::cuda {
namespace {

constexpr size_t kCastChunkBytes = size_t(16) << 20;  // <= kScratchMinBytes: never grows the scratch
static_assert(kCastChunkBytes <= kScratchMinBytes);

using Problem = GemmProblem;
using Epilogue = GemmEpilogueArgs;

__device__ __forceinline__ float load_f(const void* p, bool bf, int64_t i) {
  return bf ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store_f(void* p, bool bf, int64_t i, float v) {
  if (bf)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
  else
    static_cast<float*>(p)[i] = v;
}

// Our epilogue on rows x n of c (row stride ldc; aux shares it), reading the product
// from src (row stride src_ld; src == c in place): c = gelu?(src + bias) saving
// aux = src + bias before the GELU, or c = src * gelu'(aux) (dgelu).
__global__ void epilogue_kernel(void* c, bool c_bf, int64_t ldc, const void* src, bool src_bf, int64_t src_ld,
                                const void* bias, bool bias_bf, void* aux, bool gelu, bool dgelu, int64_t total,
                                int64_t n) {
  VLM_GRID_STRIDE(i, total) {
    const int64_t at = (i / n) * ldc + i % n;
    float x = load_f(src, src_bf, (i / n) * src_ld + i % n);
    if (dgelu) {
      x *= gelu_grad_f(load_f(aux, c_bf, at));
    } else {
      if (bias) x += load_f(bias, bias_bf, i % n);
      if (gelu) {
        if (aux) store_f(aux, c_bf, at, x);
        x = gelu_f(x);
      }
    }
    store_f(c, c_bf, at, x);
  }
}

// c = beta * c (beta == 0 writes zeros without reading): the K == 0 case.
__global__ void scale_c_kernel(void* c, bool c_bf, int64_t ldc, float beta, int64_t total, int64_t n) {
  VLM_GRID_STRIDE(i, total) {
    const int64_t at = (i / n) * ldc + i % n;
    store_f(c, c_bf, at, beta == 0.f ? 0.f : beta * load_f(c, c_bf, at));
  }
}

// dst[i] = f32 of the bf16 src at row i / n, column i % n (row stride ld): dst is dense.
__global__ void widen_kernel(float* dst, const __nv_bfloat16* src, int64_t ld, int64_t total, int64_t n) {
  VLM_GRID_STRIDE(i, total) dst[i] = __bfloat162float(src[(i / n) * ld + i % n]);
}

// dst[i] = bf16(src[i]) (round to nearest even, as convert).
__global__ void cast_bf16_kernel(__nv_bfloat16* dst, const float* src, int64_t n) {
  VLM_GRID_STRIDE(i, n) dst[i] = __float2bfloat16(src[i]);
}

// dbias[col] += sum over rows of dout[row, col]: one block per 32 columns, 16 row lanes,
// fixed summation order.
__global__ void bias_backward_kernel(float* dbias, Act dout, int64_t rows, int64_t n) {
  __shared__ float part[16][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.f;
  if (col < n)
    for (int64_t r = threadIdx.y; r < rows; r += 16) acc += dout.ld(r * n + col);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += part[k][threadIdx.x];
    dbias[col] += s;
  }
}

const char* offset(const void* p, int64_t elems, DType t) {
  return static_cast<const char*>(p) + elems * int64_t(dtype_size(t));
}
char* offset(void* p, int64_t elems, DType t) { return static_cast<char*>(p) + elems * int64_t(dtype_size(t)); }

// A bf16 C whose epilogue cuBLASLt does not fuse: the product in f32, then our epilogue
// kernel writes C, rounding to bf16 once as the CPU does (rounding the product, then
// the epilogue's result, would round twice: 7e-3 off on an H200 where one rounding is
// 3.9e-3). Batch entry by batch entry, in chunks of C's rows whose f32 product fits
// kCastChunkBytes of the scratch less its first `front` bytes (the rounded bias, matmul)
// (C widened into it first when beta != 0; at K == 0 only beta C), so no buffer grows
// with the shape.
void gemm_f32_then_epilogue(CudaStream& cs, const Problem& p, const Epilogue& ep, size_t front) {
  const int64_t budget = int64_t(kCastChunkBytes - front);
  VLM_ASSERT(p.N * int64_t(sizeof(float)) <= budget, "matmul: a row of ", p.N, " outputs exceeds the f32 chunk");
  // Chunks of a multiple of 128 rows when they hold that many: A's chunk offsets stay
  // 256-byte aligned, so every chunk gets the first chunk's plan. Rows wider than 32,768
  // outputs: chunks of a power of two, whose offsets are aligned to at least 2 x chunk
  // bytes (16 from 8 rows on), never to 2 alone (cuBLASLt may have no bf16 algorithm for
  // a 2-byte-aligned operand).
  const int64_t fits = std::max<int64_t>(1, budget / int64_t(sizeof(float)) / p.N);
  const int64_t chunk = fits >= 128 ? fits / 128 * 128 : int64_t(std::bit_floor(uint64_t(fits)));
  char* scratch = static_cast<char*>(cs.scratch(front + size_t(std::min(p.M, chunk) * p.N) * sizeof(float)));
  auto* acc = reinterpret_cast<float*>(scratch + front);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t r0 = 0; r0 < p.M; r0 += chunk) {
      const int64_t rows = std::min(p.M - r0, chunk), total = rows * p.N;
      void* c = offset(p.c, b * p.stride_c + r0 * p.ldc, DType::BF16);
      void* aux = ep.aux ? offset(ep.aux, b * p.stride_c + r0 * p.ldc, DType::BF16) : nullptr;  // laid out as C
      if (p.beta != 0.f) {
        widen_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(acc, static_cast<const __nv_bfloat16*>(c), p.ldc,
                                                                     total, p.N);
        CUDA_CHECK_LAUNCH();
      }
      if (p.K == 0) {  // no product: acc = beta C
        scale_c_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(acc, false, p.N, p.beta, total, p.N);
        CUDA_CHECK_LAUNCH();
      } else {
        Problem q = p;  // rows r0.. of batch entry b, into acc
        q.batch = 1, q.stride_a = q.stride_b = q.stride_c = 0, q.M = rows;
        q.a = offset(p.a, b * p.stride_a + (p.ta ? r0 : r0 * p.lda), p.ab);
        q.b = offset(p.b, b * p.stride_b, p.ab);
        q.c = acc, q.c_dtype = DType::F32, q.ldc = p.N;
        lt_matmul(cs, q, GemmEpilogue::None, Epilogue{});
      }
      epilogue_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(c, true, p.ldc, acc, false, p.N, ep.bias,
                                                                     ep.bias_dtype == DType::BF16, aux, ep.gelu,
                                                                     ep.dgelu, total, p.N);
      CUDA_CHECK_LAUNCH();
    }
  }
}

// C = alpha op(A) op(B) + beta C, then the epilogue: fused when cuBLASLt can, else our
// kernel after the plain GEMM (for a bf16 C, after a GEMM into f32 in the scratch past
// its first `front` bytes). A and B of one dtype.
void gemm(CudaStream& cs, const Problem& p, const Epilogue& ep, size_t front = 0) {
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  const bool c_bf = p.c_dtype == DType::BF16;
  const int64_t rows = p.batch * p.M, total = rows * p.N;
  bool fused = false;
  if (p.K == 0 && c_bf && ep.any()) return gemm_f32_then_epilogue(cs, p, ep, front);  // beta C and the epilogue, one rounding
  if (p.K == 0) {  // no product: C = beta C, then the epilogue below
    VLM_ASSERT(p.batch == 1 || p.stride_c == p.M * p.ldc, "matmul: K == 0 with a strided C");
    scale_c_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(p.c, c_bf, p.ldc, p.beta, total, p.N);
    CUDA_CHECK_LAUNCH();
  } else {
    const GemmEpilogue e = fused_epilogue(p, ep);
    if (e != GemmEpilogue::None) fused = lt_matmul(cs, p, e, ep);
    if (!fused && ep.any() && c_bf) return gemm_f32_then_epilogue(cs, p, ep, front);
    if (!fused) lt_matmul(cs, p, GemmEpilogue::None, Epilogue{});
  }
  if (ep.any() && !fused) {
    epilogue_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(p.c, c_bf, p.ldc, p.c, c_bf, p.ldc, ep.bias,
                                                                   ep.bias_dtype == DType::BF16, ep.aux, ep.gelu,
                                                                   ep.dgelu, total, p.N);
    CUDA_CHECK_LAUNCH();
  }
}

// A 2-D problem (batch 1) whose A (a_f32) or B is f32, the other bf16, C f32: the f32
// operand's stored rows go to bf16 in chunks through the scratch, one bf16 GEMM each
// (see the file comment). Chunks along K accumulate into C, so the epilogue then runs
// once, after the last chunk, in our kernel.
void gemm_mixed(CudaStream& cs, Problem p, const Epilogue& ep, bool a_f32) {
  const int64_t rows = a_f32 ? (p.ta ? p.K : p.M) : (p.tb ? p.N : p.K);  // stored rows of the f32 operand
  const int64_t cols = a_f32 ? (p.ta ? p.M : p.K) : (p.tb ? p.K : p.N);
  const int64_t ld = a_f32 ? p.lda : p.ldb;
  VLM_ASSERT(ld == cols, "matmul: a strided f32 operand in a mixed-precision GEMM");
  if (rows == 0 || p.M == 0 || p.N == 0) return gemm(cs, p, ep);  // nothing to cast (K == 0: C = beta C)
  const int64_t chunk = std::max<int64_t>(1, int64_t(kCastChunkBytes / 2) / std::max<int64_t>(cols, 1));
  VLM_ASSERT(cols * 2 <= int64_t(kCastChunkBytes), "matmul: a row of ", cols, " elements exceeds the cast chunk");
  auto* cast = static_cast<__nv_bfloat16*>(cs.scratch(size_t(std::min(rows, chunk) * cols) * 2));
  const float* f = static_cast<const float*>(a_f32 ? p.a : p.b);
  // The f32 operand's rows are M (A, no trans_a) or N (B, trans_b): the chunks are rows or
  // columns of C; otherwise they are K: the chunks add up in C.
  const bool along_k = a_f32 ? p.ta : !p.tb;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t r1 = std::min(rows, r0 + chunk), n = r1 - r0;
    cast_bf16_kernel<<<grid_1d(n * cols), kThreads, 0, cs.handle()>>>(cast, f + r0 * cols, n * cols);
    CUDA_CHECK_LAUNCH();
    Problem q = p;
    q.ab = DType::BF16;
    Epilogue e = ep;
    if (a_f32) q.a = cast; else q.b = cast;
    if (along_k) {
      q.K = n;
      // The other operand's K slice: rows of a [K,*] layout, columns of a [*,K] one.
      if (a_f32)
        q.b = offset(p.b, p.tb ? r0 : r0 * p.ldb, DType::BF16);
      else
        q.a = offset(p.a, p.ta ? r0 * p.lda : r0, DType::BF16);
      if (r0 > 0) q.beta = 1.f;
      e = Epilogue{};
    } else if (a_f32) {  // rows r0..r1 of C
      q.M = n;
      q.c = offset(p.c, r0 * p.ldc, p.c_dtype);
      if (ep.aux) e.aux = offset(ep.aux, r0 * p.ldc, p.c_dtype);
    } else {  // columns r0..r1 of C
      q.N = n;
      q.c = offset(p.c, r0, p.c_dtype);
      if (ep.bias) e.bias = offset(ep.bias, r0, ep.bias_dtype);
      if (ep.aux) e.aux = offset(ep.aux, r0, p.c_dtype);
    }
    gemm(cs, q, e);
  }
  if (along_k && ep.any()) {  // the epilogue on the accumulated C
    const int64_t total = p.M * p.N;
    const bool c_bf = p.c_dtype == DType::BF16;
    epilogue_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(p.c, c_bf, p.ldc, p.c, c_bf, p.ldc, ep.bias,
                                                                   ep.bias_dtype == DType::BF16, ep.aux, ep.gelu,
                                                                   ep.dgelu, total, p.N);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  const GemmShape g = gemm_shape(C, A, B, o);
  CudaStream& cs = cuda_stream(s);
  Problem p;
  p.ta = o.trans_a, p.tb = o.trans_b;
  p.M = g.M, p.N = g.N, p.K = g.K;
  p.lda = o.trans_a ? g.M : g.K, p.ldb = o.trans_b ? g.K : g.N, p.ldc = g.N;
  p.a = A.data(), p.b = B.data(), p.c = C.data();
  p.ab = A.dtype(), p.c_dtype = C.dtype();
  p.alpha = o.alpha, p.beta = o.beta;
  if (g.batch > 1 && A.ndim() == 3 && B.ndim() == 2 && !o.trans_a) {
    p.M = g.batch * g.M;  // [b,M,K] x [K,N]: rows of all batches are one [b*M,K] matrix
  } else if (g.batch > 1) {
    VLM_ASSERT(g.batch <= INT32_MAX, "matmul: batch too large");
    p.batch = g.batch;
    p.stride_a = g.stride_a, p.stride_b = g.stride_b, p.stride_c = g.stride_c;
  }
  Epilogue ep;
  if (o.bias) ep.bias = o.bias->data(), ep.bias_dtype = o.bias->dtype();
  ep.gelu = o.gelu;
  if (o.gelu && o.pre_gelu) ep.aux = o.pre_gelu->data();
  if (o.dgelu_pre) ep.aux = o.dgelu_pre->data(), ep.dgelu = true;

  if (A.dtype() == B.dtype()) {
    // A bf16 C's f32 bias is added as bf16 values (core/ops/gemm.inc), rounded into the
    // front of the scratch: cuBLASLt's fused epilogue and our kernel both read it there.
    // The scratch holds at least kScratchMinBytes >= kCastChunkBytes from this first
    // call, so the f32 chunks after it never regrow it (which would lose the bias).
    size_t front = 0;
    if (ep.bias && p.c_dtype == DType::BF16 && ep.bias_dtype == DType::F32 && p.M > 0 && p.N > 0) {
      front = (size_t(p.N) * 2 + 255) / 256 * 256;
      auto* b16 = static_cast<__nv_bfloat16*>(cs.scratch(front));
      cast_bf16_kernel<<<grid_1d(p.N), kThreads, 0, cs.handle()>>>(b16, static_cast<const float*>(ep.bias), p.N);
      CUDA_CHECK_LAUNCH();
      ep.bias = b16, ep.bias_dtype = DType::BF16;
    }
    return gemm(cs, p, ep, front);
  }
  // Mixed precision (file comment): batch entries one by one, each a 2-D problem (C f32,
  // core/ops/gemm.inc: no bias to round).
  VLM_ASSERT(p.c_dtype == DType::F32, "matmul: a mixed-precision GEMM into ", dtype_name(p.c_dtype));
  const bool a_f32 = A.dtype() == DType::F32;
  p.ab = DType::BF16;
  Problem one = p;
  one.batch = 1, one.stride_a = one.stride_b = one.stride_c = 0;
  for (int64_t i = 0; i < p.batch; ++i) {
    Problem q = one;
    q.a = offset(p.a, i * p.stride_a, A.dtype());
    q.b = offset(p.b, i * p.stride_b, B.dtype());
    q.c = offset(p.c, i * p.stride_c, C.dtype());
    Epilogue e = ep;
    if (ep.aux) e.aux = offset(ep.aux, i * p.stride_c, C.dtype());
    gemm_mixed(cs, q, e, a_f32);
  }
}

void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) {
  const int64_t n = dout.cols(), rows = dout.rows();
  if (n == 0 || rows == 0) return;
  const dim3 block(32, 16);
  bias_backward_kernel<<<unsigned((n + 31) / 32), block, 0, stream_of(s)>>>(f32p(dbias), act(dout), rows, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

// CUDA GEMM (core/ops/gemm.inc): matmul through cuBLASLt, and bias_backward.
//  - Row-major through column-major cuBLASLt: a row-major X[r,c] is a column-major
//    X^T[c,r], so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, i.e. cuBLASLt's
//    "A" is our B and its "B" is our A, with m = N, n = M (no copies, no transposes).
//  - Batched: strided batches; a 2-D operand is broadcast with batch stride 0. The
//    common case A[b,M,K] x B[K,N] (no trans_a) is folded into one 2-D GEMM of b*M rows.
//  - Types: f32 compute (CUBLAS_COMPUTE_32F, exact f32, no TF32) with A/B f32 -> C f32,
//    or A/B bf16 -> C f32 or bf16. Mixed (one of A/B bf16, the other f32): the f32
//    operand is converted to bf16 into the stream's cast buffer first, then the bf16
//    GEMM runs (C f32 or bf16).
//  - Epilogues: bias -> CUBLASLT_EPILOGUE_BIAS, bias+gelu -> GELU_BIAS, with pre_gelu ->
//    GELU_AUX_BIAS (cuBLASLt's GELU is the tanh approximation, as ours). They are used
//    only where cuBLASLt documents the combination (bias and pre_gelu of C's dtype, the
//    aux leading dimension N divisible by 8); otherwise, or when cuBLASLt finds no
//    algorithm for it, a plain GEMM is followed by our own epilogue kernel. Same result.
//  - beta == 0 never reads C (BLAS semantics), so garbage in C cannot leak in.
//  - bias_backward: a deterministic column-sum kernel (no atomics), dbias += .
#include <cstdint>

#include "core/cuda/cuda_util.cuh"
#include "core/ops/gemm_shape.h"

namespace vlm::cuda {
namespace {

cudaDataType_t lt_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic assumes 256
// unless told, and arena views may be less aligned.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && (reinterpret_cast<uintptr_t>(p) % a) != 0) a /= 2;
  return a;
}

// RAII owners of the cuBLASLt descriptors of one call.
struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int32_t batch, int64_t stride) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&h, t, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof stride));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(h); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct OpDesc {
  cublasLtMatmulDesc_t h = nullptr;
  OpDesc() { CUBLAS_CHECK(cublasLtMatmulDescCreate(&h, CUBLAS_COMPUTE_32F, CUDA_R_32F)); }
  ~OpDesc() { cublasLtMatmulDescDestroy(h); }
  OpDesc(const OpDesc&) = delete;
  OpDesc& operator=(const OpDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t a, const T& v) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(h, a, &v, sizeof v));
  }
};

struct Pref {
  cublasLtMatmulPreference_t h = nullptr;
  Pref() { CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&h)); }
  ~Pref() { cublasLtMatmulPreferenceDestroy(h); }
  Pref(const Pref&) = delete;
  Pref& operator=(const Pref&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t a, const T& v) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(h, a, &v, sizeof v));
  }
};

// One GEMM problem in row-major terms (see the file comment for the mapping).
struct Problem {
  bool ta, tb;
  int64_t M, N, K;
  int32_t batch;
  int64_t stride_a, stride_b, stride_c;  // elements; 0 = broadcast
  const void* a;
  const void* b;
  void* c;
  cudaDataType_t ab_type, c_type;
  float alpha, beta;
};

// Runs the GEMM with the given epilogue. Returns false (having done nothing) when
// cuBLASLt supports no algorithm for this epilogue; any other failure aborts.
bool lt_matmul(CudaStream& cs, const Problem& p, cublasLtEpilogue_t epi, const void* bias, void* aux) {
  OpDesc desc;
  const cublasOperation_t op_a = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A = our B
  const cublasOperation_t op_b = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B = our A
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
  if (bias) desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.N);
    if (p.batch > 1) desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, p.stride_c);
  }
  // Stored (pre-op) column-major shapes: our B is [K,N] row-major = N x K col-major
  // (ld N), or [N,K] = K x N (ld K) when trans_b; likewise our A; C is N x M (ld N).
  Layout la(p.ab_type, p.tb ? p.K : p.N, p.tb ? p.N : p.K, p.tb ? p.K : p.N, p.batch, p.stride_b);
  Layout lb(p.ab_type, p.ta ? p.M : p.K, p.ta ? p.K : p.M, p.ta ? p.M : p.K, p.batch, p.stride_a);
  Layout lc(p.c_type, p.N, p.M, p.N, p.batch, p.stride_c);

  Pref pref;
  const uint64_t ws = cs.workspace_bytes();
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(p.b));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(p.a));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(p.c));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(p.c));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(cs.cublaslt(), desc.h, la.h, lb.h, lc.h, lc.h, pref.h, 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
    VLM_ASSERT(epi != CUBLASLT_EPILOGUE_DEFAULT, "matmul: cuBLASLt has no algorithm for M=", p.M, " N=", p.N,
               " K=", p.K, " batch=", p.batch);
    return false;
  }
  CUBLAS_CHECK(st);
  st = cublasLtMatmul(cs.cublaslt(), desc.h, &p.alpha, p.b, la.h, p.a, lb.h, &p.beta, p.c, lc.h, p.c, lc.h,
                      &result.algo, cs.workspace(), ws, cs.handle());
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && epi != CUBLASLT_EPILOGUE_DEFAULT) return false;
  CUBLAS_CHECK(st);
  return true;
}

__device__ __forceinline__ float load_f(const void* p, bool bf, int64_t i) {
  return bf ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]) : static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store_f(void* p, bool bf, int64_t i, float v) {
  if (bf)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
  else
    static_cast<float*>(p)[i] = v;
}

// c[rows, n] = gelu?(c + bias) with pre = c + bias saved before GELU (fallback epilogue).
__global__ void epilogue_kernel(void* c, bool c_bf, const void* bias, bool bias_bf, void* pre, bool pre_bf,
                                bool gelu, int64_t total, int64_t n) {
  VLM_GRID_STRIDE(i, total) {
    float x = load_f(c, c_bf, i);
    if (bias) x += load_f(bias, bias_bf, i % n);
    if (gelu) {
      if (pre) store_f(pre, pre_bf, i, x);
      x = gelu_f(x);
    }
    store_f(c, c_bf, i, x);
  }
}

// c = beta * c (beta == 0 writes zeros without reading): the K == 0 case.
__global__ void scale_c_kernel(void* c, bool c_bf, float beta, int64_t total) {
  VLM_GRID_STRIDE(i, total) store_f(c, c_bf, i, beta == 0.f ? 0.f : beta * load_f(c, c_bf, i));
}

// dbias[col] += sum over rows of dout[row, col]: one block per 32 columns, 16 row lanes,
// fixed summation order.
__global__ void bias_backward_kernel(float* dbias, const float* dout, int64_t rows, int64_t n) {
  __shared__ float part[16][33];
  const int64_t col = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.f;
  if (col < n)
    for (int64_t r = threadIdx.y; r < rows; r += 16) acc += dout[r * n + col];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += part[k][threadIdx.x];
    dbias[col] += s;
  }
}

}  // namespace

void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  if (A.dtype() != B.dtype()) {  // mixed precision: cast the f32 operand (file comment)
    const bool a_f32 = A.dtype() == DType::F32;
    const Tensor& f = a_f32 ? A : B;
    Tensor cast(cuda_stream(s).cast_scratch(size_t(f.numel()) * 2), f.shape(), DType::BF16, DeviceKind::CUDA);
    cuda::convert(s, cast, f);
    return a_f32 ? cuda::matmul(s, C, cast, B, o) : cuda::matmul(s, C, A, cast, o);
  }
  const GemmShape g = gemm_shape(C, A, B, o);
  const int64_t M = g.M, N = g.N, K = g.K, nb = g.batch;
  const Tensor* bias = o.bias;
  const Tensor* pre = (o.gelu && o.pre_gelu) ? o.pre_gelu : nullptr;
  if (M == 0 || N == 0 || nb == 0) return;
  CudaStream& cs = cuda_stream(s);
  const bool c_bf = C.dtype() == DType::BF16;
  const int64_t total = nb * M * N;

  bool fused = false;  // the epilogue ran inside cuBLASLt
  if (K == 0) {  // no product: C = beta C, then the epilogue below
    scale_c_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(C.data(), c_bf, o.beta, total);
    CUDA_CHECK_LAUNCH();
  } else {
    Problem p{o.trans_a, o.trans_b, M, N, K, 1, 0, 0, 0, A.data(), B.data(), C.data(),
              lt_type(A.dtype()), lt_type(C.dtype()), o.alpha, o.beta};
    if (nb > 1 && A.ndim() == 3 && B.ndim() == 2 && !o.trans_a) {
      p.M = nb * M;  // [b,M,K] x [K,N]: rows of all batches are one [b*M,K] matrix
    } else if (nb > 1) {
      VLM_ASSERT(nb <= INT32_MAX, "matmul: batch too large");
      p.batch = int32_t(nb);
      p.stride_a = g.stride_a;
      p.stride_b = g.stride_b;
      p.stride_c = g.stride_c;
    }
    // Epilogue in cuBLASLt where documented: bias/aux of C's dtype, aux ld % 8 == 0.
    // The bias and aux pointers also need 16-byte alignment (no preference attribute
    // tells the heuristic about them, and a misaligned one fails in cublasLtMatmul with
    // an error other than NOT_SUPPORTED, or faults); arena views may be less aligned,
    // so those take our epilogue kernel instead.
    const bool bias_ok = !bias || (bias->dtype() == C.dtype() && alignment_of(bias->data()) >= 16);
    const bool aux_ok = !pre || (pre->dtype() == C.dtype() && N % 8 == 0 && alignment_of(pre->data()) >= 16);
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (bias_ok && aux_ok) {
      if (o.gelu)
        epi = pre ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                  : (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
      else if (bias)
        epi = CUBLASLT_EPILOGUE_BIAS;
    }
    if (epi != CUBLASLT_EPILOGUE_DEFAULT)
      fused = lt_matmul(cs, p, epi, bias ? bias->data() : nullptr, pre ? pre->data() : nullptr);
    if (!fused) lt_matmul(cs, p, CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr);
  }
  if ((bias || o.gelu) && !fused) {
    epilogue_kernel<<<grid_1d(total), kThreads, 0, cs.handle()>>>(
        C.data(), c_bf, bias ? bias->data() : nullptr, bias && bias->dtype() == DType::BF16,
        pre ? pre->data() : nullptr, pre && pre->dtype() == DType::BF16, o.gelu, total, N);
    CUDA_CHECK_LAUNCH();
  }
}

void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) {
  const int64_t n = dout.cols(), rows = dout.rows();
  if (n == 0 || rows == 0) return;
  const dim3 block(32, 16);
  bias_backward_kernel<<<unsigned((n + 31) / 32), block, 0, stream_of(s)>>>(f32p(dbias), f32p(dout), rows, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

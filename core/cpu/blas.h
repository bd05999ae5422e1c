// Row-major GEMM for the CPU ops (gemm.cpp, conv.cpp, attention.cpp) on OpenBLAS held
// to one thread per call, running the kernel set chosen for this CPU (core/cpu/blas.cpp;
// docs/cpu-performance.md, "Kernels per CPU"):
//  - blas_gemm: C[M,N] = alpha op(A) op(B) + beta C, contiguous operands;
//  - blas_gemm_ld: the same with explicit leading dimensions (strided row views, e.g.
//    one head of a packed [T,NH,HS] tensor has ld = NH*HS); K == 0 applies beta by hand.
// Threads: a product big enough is cut into blocks of C whose layout depends only on
// its shape (and the machine's core count), one single-threaded BLAS call per block, run by
// the caller's pool (core/cpu/thread_pool.h) or in order inside a pool task. Never
// split over K, so C is bitwise the same for any thread count.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace vlm::cpu {

struct CpuFeatures;

// The BLAS library and the kernel set it runs.
struct BlasInfo {
  std::string library;    // "OpenBLAS 0.3.21"
  std::string kernels;    // "Cooperlake", as the library names them (openblas_get_corename)
  std::string chosen_by;  // "cpuid" (set by blas_init), "OPENBLAS_CORETYPE" (the user's), "the library"
  bool baseline = false;  // kernels without AVX2: several times slower matmuls
};
// The kernel set is chosen before main (blas_init's third point).
const BlasInfo& blas_info();

// The OpenBLAS kernel set (an OPENBLAS_CORETYPE name) for a CPU with these features:
// Cooperlake with AVX512_BF16, SkylakeX with AVX-512, Zen (AMD, Hygon) or Haswell with
// AVX2; nullptr below AVX2 (the library's own choice stands).
const char* openblas_core_for(const CpuFeatures& f);

// Threads of one BLAS call (1 once blas_init() ran; other values mean a second pool).
int blas_threads();
// Once per process, before the first product (gemm_ld calls it; the CPU backend at
// start-up): holds OpenBLAS to one thread per call and stops its own threads. Before
// main, a constructor of blas.cpp has made OpenBLAS run openblas_core_for(cpu_features())
// unless the user set OPENBLAS_CORETYPE (OpenBLAS picks its kernels when it is loaded,
// and a version that does not know the CPU falls back to SSE3 ones: it is
// re-initialised with the kernel set from cpuid).
void blas_init();

// Blocks an M x N x K product is cut into (1: one BLAS call).
int64_t gemm_blocks(int64_t M, int64_t N, int64_t K);

// C (row stride ldc) = alpha op(A) op(B) + beta C; requires M, N, K >= 1.
void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, double beta, float* C, int64_t ldc);
void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
             const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// bf16 operands, f32 C, on the CPU's bf16 units (core/cpu/gemm_bf16.h: f32 sums in a
// fixed k order); only where gemm_bf16_units() (AVX512_BF16), else an internal error.
bool gemm_bf16_units();
void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const bf16* A, int64_t lda,
             const bf16* B, int64_t ldb, double beta, float* C, int64_t ldc);

// C[M,N] (row stride ldc) = alpha op(A) op(B) + beta C; A, B with row strides lda, ldb.
// beta == 0 with K == 0 writes zeros (BLAS may skip the call entirely).
template <typename T>
void blas_gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
                  const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? T(0) : T(beta) * C[i * ldc + j];
    return;
  }
  gemm_ld(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Contiguous operands: A is [M,K] ([K,M] when ta), B is [K,N] ([N,K] when tb), C [M,N].
template <typename T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const T* A, const T* B,
               double beta, T* C) {
  blas_gemm_ld(ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

}  // namespace vlm::cpu

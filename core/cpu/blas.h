// Thin row-major wrappers over OpenBLAS cblas_sgemm / cblas_dgemm for the CPU ops
// (gemm.cpp, conv.cpp): C[M,N] = alpha op(A) op(B) + beta C, contiguous operands.
#pragma once
#include <cblas.h>

#include <cstdint>

namespace vlm::cpu {

inline void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float* A,
                      const float* B, double beta, float* C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
              int(K), float(alpha), A, int(ta ? M : K), B, int(tb ? K : N), float(beta), C, int(N));
}

inline void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
              int(K), alpha, A, int(ta ? M : K), B, int(tb ? K : N), beta, C, int(N));
}

}  // namespace vlm::cpu

// Thin row-major wrappers over OpenBLAS cblas_sgemm / cblas_dgemm for the CPU ops
// (gemm.cpp, conv.cpp, attention.cpp):
//  - blas_gemm: C[M,N] = alpha op(A) op(B) + beta C, contiguous operands;
//  - blas_gemm_ld: the same with explicit leading dimensions (strided row views, e.g.
//    one head of a packed [T,NH,HS] tensor has ld = NH*HS); K == 0 applies beta by hand;
//  - BlasThreads: RAII cap on OpenBLAS threads (restored on exit), used around OpenMP
//    regions that call BLAS from several threads, so the two pools do not nest.
// OpenBLAS splits M/N between its threads, never K, so every element of C is computed
// whole by one thread, in the same order, for any thread count (deterministic).
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

namespace detail {
inline void gemm_ld(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const float* A,
                    int lda, const float* B, int ldb, double beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, float(alpha), A, lda, B, ldb, float(beta), C, ldc);
}
inline void gemm_ld(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha, const double* A,
                    int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
}  // namespace detail

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
  detail::gemm_ld(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K), alpha, A,
                  int(lda), B, int(ldb), beta, C, int(ldc));
}

class BlasThreads {
 public:
  explicit BlasThreads(int n) : saved_(openblas_get_num_threads()) { openblas_set_num_threads(n); }
  ~BlasThreads() { openblas_set_num_threads(saved_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

}  // namespace vlm::cpu

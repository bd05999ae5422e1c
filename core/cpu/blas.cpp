// GEMM on OpenBLAS held to one thread per call, cut into blocks that the caller's
// thread pool runs (contract: blas.h).
// OpenBLAS (its pthreads build) starts its own threads when it is loaded; blas_init()
// sets it to one thread per call and stops them (blas_thread_shutdown_, the call
// OpenBLAS itself makes before a fork), so every product runs on the calling thread and
// none of OpenBLAS's threads is left to spin. Its calls are safe from several threads
// at once (its buffer allocator locks); Debian's sequential build is not, which is why
// it is not used.
// The block layout depends only on the product's shape and on the machine's core
// count, never on the thread count: a product of F flops gets
//   nb = the largest power of two <= min(F / kBlockFlops, max_blocks()),
// blocks, made by halving the longer side of the current block (columns on a tie)
// while both sides stay >= kMinSide; block bounds are rounded to multiples of 16.
// Each block is one BLAS call, so an element of C always comes out of the
// same call with the same operands: C is bitwise the same at any thread count, and
// whether the blocks run in parallel, in order, or inside another op's task. (Splitting
// a product at thread-count-dependent bounds would not be: BLAS kernels round an
// element differently depending on where it falls in the call's panels.)
// Cost: each column block re-packs op(A) and each row block op(B); with blocks of
// >= kBlockFlops and sides >= kMinSide this stays within a few percent of one call.
#include <cblas.h>

#include <algorithm>

// OpenBLAS: stops its thread server (exported by its threaded builds; weak, so another
// BLAS links too and simply has no threads to stop).
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

#include "core/cpu/blas.h"
#include "core/cpu/thread_pool.h"

namespace vlm::cpu {
namespace {

constexpr double kBlockFlops = double(1 << 23);  // ~8 MFLOP: ~0.1 ms of one core
constexpr int64_t kMinSide = 128;

// Twice the cores rounded up to a power of two (two blocks per core let a thread that
// was slowed down hand work over), from 4 to 64.
int64_t max_blocks() {
  static const int64_t n = [] {
    int64_t b = 4;
    while (b < 2 * int64_t(cpu_cores()) && b < 64) b *= 2;
    return b;
  }();
  return n;
}

inline CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

void seq_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, double beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), float(alpha), A, int(lda), B, int(ldb),
              float(beta), C, int(ldc));
}

void seq_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
              const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}

// Bound i of `parts` equal parts of [0, D), rounded to a multiple of 16.
inline int64_t bound(int64_t D, int64_t parts, int64_t i) {
  return i == parts ? D : std::min(D, (D * i / parts + 8) / 16 * 16);
}

struct Blocks {
  int64_t rows = 1, cols = 1;
};

Blocks blocks_of(int64_t M, int64_t N, int64_t K) {
  const double flops = 2.0 * double(M) * double(N) * double(K);
  Blocks b;
  for (;;) {
    const int64_t next = 2 * b.rows * b.cols;
    if (double(next) * kBlockFlops > flops || next > max_blocks()) break;
    const bool cols = N / b.cols >= M / b.rows;  // halve the longer side (columns on a tie)
    if (cols && N / (2 * b.cols) >= kMinSide)
      b.cols *= 2;
    else if (M / (2 * b.rows) >= kMinSide)
      b.rows *= 2;
    else if (N / (2 * b.cols) >= kMinSide)
      b.cols *= 2;
    else
      break;
  }
  return b;
}

template <typename T>
void block_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
                const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  const Blocks bl = blocks_of(M, N, K);
  const int64_t br = bl.rows, bc = bl.cols;
  if (br * bc == 1) {
    seq_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  auto run_block = [&](int64_t blk) {
    const int64_t r = blk / bc, c = blk % bc;
    const int64_t m0 = bound(M, br, r), m1 = bound(M, br, r + 1), n0 = bound(N, bc, c), n1 = bound(N, bc, c + 1);
    if (m1 <= m0 || n1 <= n0) return;
    const T* a = ta ? A + m0 : A + m0 * lda;  // rows [m0, m1) of op(A)
    const T* b = tb ? B + n0 * ldb : B + n0;  // columns [n0, n1) of op(B)
    seq_gemm(ta, tb, m1 - m0, n1 - n0, K, alpha, a, lda, b, ldb, beta, C + m0 * ldc + n0, ldc);
  };
  const int64_t nb = br * bc;
  parallel_tasks(nb, threads_for(nb, 1), run_block);
}

}  // namespace

void blas_init() {
  static const bool done = [] {
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    return true;
  }();
  (void)done;
}

int blas_threads() {
  blas_init();
  return openblas_get_num_threads();
}

int64_t gemm_blocks(int64_t M, int64_t N, int64_t K) {
  const Blocks b = blocks_of(M, N, K);
  return b.rows * b.cols;
}

void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, double beta, float* C, int64_t ldc) {
  blas_init();
  block_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
             const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  blas_init();
  block_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace vlm::cpu

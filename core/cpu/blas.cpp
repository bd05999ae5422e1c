// GEMM on OpenBLAS held to one thread per call, cut into blocks that the caller's
// thread pool runs (contract: blas.h).
// Kernels: OpenBLAS's DYNAMIC_ARCH build picks a kernel set from cpuid when it is
// loaded, before main, and one that does not know the CPU model falls back to SSE3
// kernels (Debian 12's 0.3.21 on Intel family 6 model 207 runs "Prescott", 4x slower
// than its SkylakeX kernels there). It is loaded by the binary and again through
// OpenCV's LAPACK, so it cannot be loaded later with the variable set; instead
// a constructor here chooses the set from the CPU's features (openblas_core_for), and when the
// library runs another one, re-initialises it with OPENBLAS_CORETYPE set for that call
// only: gotoblas_dynamic_quit() + gotoblas_dynamic_init() (exported by every
// DYNAMIC_ARCH build; they swap the kernel table and its blocking parameters, nothing
// else; the buffers are allocated at the first call, which has not happened). A name
// the library does not accept by name (0.3.21 and 0.3.28 refuse "Cooperlake" and
// "SapphireRapids" there) makes it take its own best by features, which for these is
// the same set. blas_info() then reports what openblas_get_corename() says, not what
// was asked. The choice runs from a constructor, before main, while no thread of ours
// or of MPI exists (setenv is not safe beside threads that read the environment;
// OpenBLAS's own, started at load, do not); blas_init() stops OpenBLAS's threads.
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
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

// OpenBLAS: stops its thread server (exported by its threaded builds); re-selects the
// kernel table (DYNAMIC_ARCH builds); names itself. Weak, so another BLAS links too.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" char* openblas_get_config(void) __attribute__((weak));
extern "C" char* openblas_get_corename(void) __attribute__((weak));

#include "base/error.h"
#include "core/cpu/blas.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_bf16.h"
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

void seq_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const bf16* A, int64_t lda,
              const bf16* B, int64_t ldb, double beta, float* C, int64_t ldc) {
  gemm_bf16_seq(ta, tb, M, N, K, float(alpha), A, lda, B, ldb, float(beta), C, ldc);
}

template <typename T, typename TC>
void block_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
                const T* B, int64_t ldb, double beta, TC* C, int64_t ldc) {
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

// The kernel sets with AVX2 or more, as openblas_get_corename() names them.
bool avx2_core(const std::string& core) {
  for (const char* c : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator"})
    if (!strcasecmp(core.c_str(), c)) return true;
  return false;
}

// Re-initialises OpenBLAS's kernel table with OPENBLAS_CORETYPE = core (file comment).
void reselect_openblas(const char* core) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;  // not a DYNAMIC_ARCH build
  setenv("OPENBLAS_CORETYPE", core, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
}

// Chooses the kernel set (file comment) and records what the library runs.
BlasInfo select_kernels() {
  BlasInfo info;
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const char* want = openblas_core_for(cpu_features());
  auto corename = [] { return std::string(openblas_get_corename ? openblas_get_corename() : "unknown"); };
  if (user && *user) {
    info.chosen_by = "OPENBLAS_CORETYPE";
  } else if (want) {
    if (strcasecmp(corename().c_str(), want)) reselect_openblas(want);
    info.chosen_by = "cpuid";
  } else {
    info.chosen_by = "the library";
  }
  info.kernels = corename();
  info.library = "OpenBLAS";
  if (openblas_get_config) {  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words
    std::istringstream words(openblas_get_config());
    std::string name, version;
    words >> name >> version;
    if (!name.empty()) info.library = name + (version.empty() ? "" : " " + version);
  }
  info.baseline = !avx2_core(info.kernels);
  return info;
}

const BlasInfo& kernels_once() {
  static const BlasInfo info = select_kernels();
  return info;
}

// Before main (blas.h): one thread, no MPI yet.
[[maybe_unused]] __attribute__((constructor)) void select_kernels_at_load() { kernels_once(); }

}  // namespace

const char* openblas_core_for(const CpuFeatures& f) {
  if (f.avx512_bf16) return "Cooperlake";
  if (f.avx512) return "SkylakeX";
  if (f.avx2) return f.vendor == "AuthenticAMD" || f.vendor == "HygonGenuine" ? "Zen" : "Haswell";
  return nullptr;
}

void blas_init() {
  static const bool done = [] {
    kernels_once();
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
    return true;
  }();
  (void)done;
}

const BlasInfo& blas_info() { return kernels_once(); }

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

bool gemm_bf16_units() { return gemm_bf16_native(); }

void gemm_ld(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const bf16* A, int64_t lda,
             const bf16* B, int64_t ldb, double beta, float* C, int64_t ldc) {
  blas_init();
  block_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace vlm::cpu

/* BLAS candidates for the CPU backend, side by side (not built by CMake; compiled and
 * run by bench/blas_candidates.sh, once per library). For each GEMM shape of the
 * language-model step (y[M,N] = x[M,K] @ W[N,K]^T and the two backward products at
 * T = 128 and 512, GPT-2 widths) and the 2048^3 square, prints GFLOP/s; then the
 * "mixed" loop that a training step is: a GEMM followed by an OpenMP elementwise
 * region over its output, repeated, where a BLAS with its own thread pool fights the
 * OpenMP pool (ms per GEMM + region).
 * Threads: OMP_NUM_THREADS (OpenMP builds) and OPENBLAS_NUM_THREADS (pthreads build),
 * set by the script. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float* filled(long n, unsigned seed) {
  float* p = aligned_alloc(256, (size_t)((n * 4 + 255) / 256 * 256));
  for (long i = 0; i < n; ++i) seed = seed * 1664525u + 1013904223u, p[i] = (float)(seed >> 8) / (1 << 24) - 0.5f;
  return p;
}

/* C[M,N] = op(A) op(B): ta/tb as in the ops (row-major). */
static void gemm(int ta, int tb, int M, int N, int K, const float* A, const float* B, float* C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A,
              ta ? M : K, B, tb ? K : N, 0.f, C, N);
}

static double seconds_per_call(int ta, int tb, int M, int N, int K, const float* A, const float* B, float* C,
                               double budget) {
  gemm(ta, tb, M, N, K, A, B, C);
  int n = 0;
  double t0 = now(), t;
  do {
    gemm(ta, tb, M, N, K, A, B, C);
    ++n;
  } while ((t = now() - t0) < budget);
  return t / n;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "?";
  const double budget = argc > 2 ? atof(argv[2]) : 0.3;
  /* {ta, tb, M, N, K, what} */
  struct {
    int ta, tb, m, n, k;
    const char* what;
  } cases[] = {
      {0, 1, 128, 2304, 768, "qkv fwd T=128"},      {0, 1, 128, 3072, 768, "mlp up fwd T=128"},
      {0, 1, 128, 768, 3072, "mlp down fwd T=128"}, {0, 0, 128, 768, 3072, "mlp up dX T=128"},
      {1, 0, 3072, 768, 128, "mlp up dW T=128"},    {0, 1, 128, 50304, 768, "lm head fwd T=128"},
      {0, 1, 512, 2304, 768, "qkv fwd T=512"},      {0, 1, 512, 768, 3072, "mlp down fwd T=512"},
      {0, 1, 2048, 2048, 2048, "square 2048"},
  };
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  float *A = filled(2048L * 50304, 1), *B = filled(2048L * 50304, 2), *C = filled(2048L * 50304, 3);
  for (int i = 0; i < ncases; ++i) {
    double s = seconds_per_call(cases[i].ta, cases[i].tb, cases[i].m, cases[i].n, cases[i].k, A, B, C, budget);
    printf("%-16s %-20s %5d %5d %5d  %8.3f ms  %7.1f GFLOP/s\n", name, cases[i].what, cases[i].m, cases[i].n,
           cases[i].k, s * 1e3, 2.0 * cases[i].m * cases[i].n * cases[i].k / s / 1e9);
  }
  /* Mixed: GEMM (mlp up, T=128) then an OpenMP region over its output, 200 times. */
  const int M = 128, N = 3072, K = 768, reps = 200;
  double t0 = now();
  for (int r = 0; r < reps; ++r) {
    gemm(0, 1, M, N, K, A, B, C);
#pragma omp parallel for schedule(static)
    for (long j = 0; j < (long)M * N; ++j) C[j] = C[j] * 0.5f + A[j];
  }
  printf("%-16s %-20s %5d %5d %5d  %8.3f ms per GEMM + OpenMP region\n", name, "mixed", M, N, K,
         (now() - t0) / reps * 1e3);
  free(A), free(B), free(C);
  return 0;
}

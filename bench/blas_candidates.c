/* BLAS candidates for the CPU backend, side by side (not built by CMake: a C file, so
 * bench/CMakeLists.txt's *.cpp glob skips it; compiled and run by
 * bench/blas_candidates.sh, once per library). For each GEMM shape of the
 * language-model step (y[M,N] = x[M,K] @ W[N,K]^T and the two backward products at
 * T = 128 and 512, GPT-2 widths) and the 2048^3 square, prints GFLOP/s, and GFLOP per
 * CPU-second of the process (the figure that holds on a machine shared with other
 * work, and that counts threads that spin while waiting); with
 * -DWITH_SBGEMM (OpenBLAS) also the bf16 x bf16 -> f32 product (cblas_sbgemm) of the
 * same shapes; then the "mixed" loop that a training step is: a GEMM followed by an
 * OpenMP elementwise region over its output, repeated, where a BLAS with its own thread
 * pool fights the OpenMP pool (ms per GEMM + region).
 * -DUSE_DNNL: the products go through oneDNN's dnnl_sgemm (row-major, its OpenMP
 * threads) instead of cblas_sgemm.
 * With a third argument `safety`: instead, 3 threads call the BLAS at once (one thread
 * per call: the script sets the thread variables to 1), 50000 products each over a
 * mix of shapes and transposes, and every result is compared with the same product
 * computed alone; prints the wrong ones (a BLAS the pool can use must print 0).
 * Threads: OMP_NUM_THREADS (OpenMP builds), OPENBLAS_NUM_THREADS (pthreads build),
 * BLIS_NUM_THREADS, set by the script. The first line names the library's kernels
 * (OpenBLAS: openblas_get_corename(), which OPENBLAS_CORETYPE sets at load). */
#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU seconds of the whole process (all its threads, spinning included). */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static float* filled(long n, unsigned seed) {
  float* p = aligned_alloc(256, (size_t)((n * 4 + 255) / 256 * 256));
  for (long i = 0; i < n; ++i) seed = seed * 1664525u + 1013904223u, p[i] = (float)(seed >> 8) / (1 << 24) - 0.5f;
  return p;
}

/* Which kernels the library runs (weak: present in OpenBLAS, BLIS or neither). */
char* openblas_get_corename(void) __attribute__((weak));
char* openblas_get_config(void) __attribute__((weak));
char* bli_info_get_version_str(void) __attribute__((weak));
int bli_arch_query_id(void) __attribute__((weak));
char* bli_arch_string(int) __attribute__((weak));

static void describe(const char* name) {
  if (openblas_get_config) printf("%-16s %s; kernels: %s\n", name, openblas_get_config(), openblas_get_corename());
  else if (bli_info_get_version_str)
    printf("%-16s BLIS %s; kernels: %s\n", name, bli_info_get_version_str(), bli_arch_string(bli_arch_query_id()));
#ifdef USE_DNNL
  else {
    const dnnl_version_t* v = dnnl_version();
    printf("%-16s oneDNN %d.%d.%d (%s); kernels: its JIT for this CPU (ONEDNN_VERBOSE=1 prints the ISA)\n", name,
           v->major, v->minor, v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime");
  }
#endif
}

/* C[M,N] = op(A) op(B): ta/tb as in the ops (row-major). */
static void gemm(int ta, int tb, int M, int N, int K, const float* A, const float* B, float* C) {
#ifdef USE_DNNL
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, A, ta ? M : K, B, tb ? K : N, 0.f, C, N);
#else
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A,
              ta ? M : K, B, tb ? K : N, 0.f, C, N);
#endif
}

#ifdef WITH_SBGEMM
static void sbgemm(int ta, int tb, int M, int N, int K, const bfloat16* A, const bfloat16* B, float* C) {
  cblas_sbgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A,
               ta ? M : K, B, tb ? K : N, 0.f, C, N);
}
#endif

/* Seconds per call of f (f32 or, with bf16 set, the bf16 product), over `budget`;
 * *cpu: the process's CPU seconds per call. */
static double seconds_per_call(int bf16, int ta, int tb, int M, int N, int K, const void* A, const void* B, float* C,
                               double budget, double* cpu) {
  int n = -1; /* the first call warms up */
  double t0 = 0, t = 0, c0 = 0;
  do {
#ifdef WITH_SBGEMM
    if (bf16) sbgemm(ta, tb, M, N, K, A, B, C);
    else
#endif
      gemm(ta, tb, M, N, K, A, B, C);
    if (++n == 0) t0 = now(), c0 = cpu_now();
  } while (n == 0 || (t = now() - t0) < budget);
  (void)bf16;
  *cpu = (cpu_now() - c0) / n;
  return t / n;
}

/* The safety check: NCASES products, references computed alone, then 3 threads. */
enum { NCASES = 32, CALLS = 50000 };
static struct {
  int m, n, k, ta, tb;
  float *a, *b, *ref;
} sc[NCASES];
static int wrong[3];

static void* safety_worker(void* arg) {
  const int id = (int)(long)arg;
  float* c = malloc(sizeof(float) * 128 * 768); /* the largest C of the mix */
  for (int it = 0; it < CALLS; ++it) {
    const int i = (it * 7 + id * 13) % NCASES;
    gemm(sc[i].ta, sc[i].tb, sc[i].m, sc[i].n, sc[i].k, sc[i].a, sc[i].b, c);
    for (long j = 0; j < (long)sc[i].m * sc[i].n; ++j)
      if (c[j] != sc[i].ref[j]) {
        wrong[id]++;
        break;
      }
  }
  free(c);
  return NULL;
}

static int safety(const char* name) {
  static const int dims[8][3] = {{150, 145, 200}, {64, 51, 16}, {10, 10, 24}, {300, 290, 200},
                                 {70, 130, 16},   {5, 5, 16},   {51, 51, 16}, {128, 768, 64}};
  for (int i = 0; i < NCASES; ++i) {
    sc[i].m = dims[i / 4][0], sc[i].n = dims[i / 4][1], sc[i].k = dims[i / 4][2];
    sc[i].ta = i & 1, sc[i].tb = (i >> 1) & 1;
    sc[i].a = filled((long)sc[i].m * sc[i].k, 10 + i), sc[i].b = filled((long)sc[i].n * sc[i].k, 50 + i);
    sc[i].ref = filled((long)sc[i].m * sc[i].n, 0);
    gemm(sc[i].ta, sc[i].tb, sc[i].m, sc[i].n, sc[i].k, sc[i].a, sc[i].b, sc[i].ref);
  }
  pthread_t th[3];
  for (long t = 0; t < 3; ++t) pthread_create(&th[t], NULL, safety_worker, (void*)t);
  for (int t = 0; t < 3; ++t) pthread_join(th[t], NULL);
  printf("%-16s %d of %d products wrong with 3 threads calling at once\n", name, wrong[0] + wrong[1] + wrong[2],
         3 * CALLS);
  return 0;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "?";
  if (argc > 3) return safety(name);
  const double budget = argc > 2 ? atof(argv[2]) : 0.3;
  describe(name);
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
  /* A: at most 2048 x 2048, B: the lm head's 50304 x 768, C: 128 x 50304 (> 2048 x 2048). */
  float *A = filled(2048L * 2048, 1), *B = filled(50304L * 768, 2), *C = filled(128L * 50304, 3);
  for (int i = 0; i < ncases; ++i) {
    double c, s = seconds_per_call(0, cases[i].ta, cases[i].tb, cases[i].m, cases[i].n, cases[i].k, A, B, C, budget, &c);
    const double f = 2.0 * cases[i].m * cases[i].n * cases[i].k / 1e9;
    printf("%-16s %-20s %5d %5d %5d  %8.3f ms  %7.1f GFLOP/s  %7.1f GFLOP/cpu-s\n", name, cases[i].what, cases[i].m,
           cases[i].n, cases[i].k, s * 1e3, f / s, f / c);
  }
#ifdef WITH_SBGEMM
  { /* bf16 operands (any bit pattern of a finite bf16: the top half of the f32 values) */
    bfloat16 *Ab = malloc(2048L * 2048 * 2), *Bb = malloc(50304L * 768 * 2);
    for (long i = 0; i < 2048L * 2048; ++i) Ab[i] = (bfloat16)(*(unsigned*)&A[i] >> 16);
    for (long i = 0; i < 50304L * 768; ++i) Bb[i] = (bfloat16)(*(unsigned*)&B[i] >> 16);
    for (int i = 0; i < ncases; ++i) {
      double c, s = seconds_per_call(1, cases[i].ta, cases[i].tb, cases[i].m, cases[i].n, cases[i].k, Ab, Bb, C, budget, &c);
      const double f = 2.0 * cases[i].m * cases[i].n * cases[i].k / 1e9;
      printf("%-16s bf16 %-15s %5d %5d %5d  %8.3f ms  %7.1f GFLOP/s  %7.1f GFLOP/cpu-s\n", name, cases[i].what,
             cases[i].m, cases[i].n, cases[i].k, s * 1e3, f / s, f / c);
    }
    free(Ab), free(Bb);
  }
#endif
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

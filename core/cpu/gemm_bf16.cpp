// bf16 GEMM on vdpbf16ps (contract: gemm_bf16.h).
// Packing: op(A) into panels of kMr rows, per pair of k one 32-bit word per row (the
// bf16 at 2p in the low half, 2p+1 in the high half: the word is broadcast to every
// lane); op(B) into panels of kNr columns, per pair of k the kNr columns' pairs side by
// side (one 64-byte row = 2 zmm). Rows past M, columns past N and the odd K's last pair
// are padded with zeros; stores are masked to the real tile. A is packed once per call,
// B per chunk of columns small enough to stay in L2 (kChunkBytes); the micro-kernel
// holds a 12 x 32 tile of C in 24 zmm accumulators over the whole K, so a C element is
// one register's sum in k order (gemm_bf16.h), then scaled and stored once.
// Scratch: slots 1 and 2 of the calling thread (core/cpu/cpu_util.h; the caller, gemm.cpp
// through blas.cpp, keeps its operands in slots 0 and 3).
#include "core/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "core/cpu/cpu_features.h"
#include "core/cpu/cpu_util.h"

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 11)
#include <immintrin.h>
#define VLM_BF16_KERNEL 1
#define VLM_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#endif

namespace vlm::cpu {

#ifdef VLM_BF16_KERNEL
namespace {

constexpr int kMr = 12, kNr = 32;
constexpr int64_t kChunkBytes = int64_t(512) << 10;  // packed B per chunk

// Element (r, k) of op(X) for X with row stride ld, as raw bf16 bits.
inline uint16_t at(const bf16* X, int64_t ld, bool t, int64_t r, int64_t k) {
  return t ? X[k * ld + r].bits : X[r * ld + k].bits;
}

// Rows [r0, r0 + kMr) of op(A) (M rows), K columns, into kp pairs of kMr words.
void pack_a(uint32_t* dst, const bf16* A, int64_t lda, bool ta, int64_t M, int64_t K, int64_t r0, int64_t kp) {
  for (int64_t p = 0; p < kp; ++p)
    for (int r = 0; r < kMr; ++r) {
      const int64_t row = r0 + r, k = 2 * p;
      uint32_t w = 0;
      if (row < M) {
        w = at(A, lda, ta, row, k);
        if (k + 1 < K) w |= uint32_t(at(A, lda, ta, row, k + 1)) << 16;
      }
      dst[p * kMr + r] = w;
    }
}

// Columns [c0, c0 + kNr) of op(B) (K x N), into kp rows of kNr pairs.
void pack_b(uint16_t* dst, const bf16* B, int64_t ldb, bool tb, int64_t N, int64_t K, int64_t c0, int64_t kp) {
  // op(B)[k][c] = tb ? B[c * ldb + k] : B[k * ldb + c]
  for (int64_t p = 0; p < kp; ++p)
    for (int c = 0; c < kNr; ++c) {
      const int64_t col = c0 + c, k = 2 * p;
      uint16_t lo = 0, hi = 0;
      if (col < N) {
        lo = tb ? B[col * ldb + k].bits : B[k * ldb + col].bits;
        if (k + 1 < K) hi = tb ? B[col * ldb + k + 1].bits : B[(k + 1) * ldb + col].bits;
      }
      dst[(p * kNr + c) * 2] = lo;
      dst[(p * kNr + c) * 2 + 1] = hi;
    }
}

// C tile (mr <= kMr rows, nr <= kNr columns) = alpha * sum + beta * C.
VLM_BF16_TARGET void kernel(int64_t kp, const uint32_t* a, const uint16_t* b, float* c, int64_t ldc, int mr,
                            int nr, float alpha, float beta) {
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) acc[r][0] = _mm512_setzero_ps(), acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * 2 * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * 2 * kNr + kNr);
    const uint32_t* ap = a + p * kMr;
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = __mmask16(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const __mmask16 m1 = __mmask16(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
#pragma GCC unroll 12
  for (int r = 0; r < kMr; ++r) {
    if (r >= mr) break;
    float* row = c + r * ldc;
    for (int h = 0; h < 2; ++h) {
      const __mmask16 m = h ? m1 : m0;
      if (!m) continue;
      __m512 v = alpha == 1.f ? acc[r][h] : _mm512_mul_ps(va, acc[r][h]);
      if (beta != 0.f) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, row + 16 * h)));
      _mm512_mask_storeu_ps(row + 16 * h, m, v);
    }
  }
}

}  // namespace

bool gemm_bf16_native() { return cpu_features().avx512_bf16; }

void gemm_bf16_seq(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                   const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  VLM_ASSERT(gemm_bf16_native() && M > 0 && N > 0 && K > 0, "gemm_bf16_seq: ", M, "x", N, "x", K,
             " on a CPU without AVX512_BF16 or with an empty side");
  const int64_t kp = (K + 1) / 2, mp = (M + kMr - 1) / kMr;
  uint32_t* ap = thread_scratch<uint32_t>(1, mp * kp * kMr);
  for (int64_t i = 0; i < mp; ++i) pack_a(ap + i * kp * kMr, A, lda, ta, M, K, i * kMr, kp);
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / (kp * kNr * 4));  // panels of B per chunk
  uint16_t* bp = thread_scratch<uint16_t>(2, std::min(chunk, (N + kNr - 1) / kNr) * kp * kNr * 2);
  for (int64_t n0 = 0; n0 < N; n0 += chunk * kNr) {
    const int64_t panels = std::min(chunk, (N - n0 + kNr - 1) / kNr);
    for (int64_t j = 0; j < panels; ++j) pack_b(bp + j * kp * kNr * 2, B, ldb, tb, N, K, n0 + j * kNr, kp);
    for (int64_t i = 0; i < mp; ++i)
      for (int64_t j = 0; j < panels; ++j) {
        const int64_t r0 = i * kMr, c0 = n0 + j * kNr;
        kernel(kp, ap + i * kp * kMr, bp + j * kp * kNr * 2, C + r0 * ldc + c0, ldc, int(std::min<int64_t>(kMr, M - r0)),
               int(std::min<int64_t>(kNr, N - c0)), alpha, beta);
      }
  }
}

#else  // no kernel in this build

bool gemm_bf16_native() { return false; }

void gemm_bf16_seq(bool, bool, int64_t, int64_t, int64_t, float, const bf16*, int64_t, const bf16*, int64_t, float,
                   float*, int64_t) {
  VLM_ASSERT(false, "gemm_bf16_seq: this build has no AVX512_BF16 kernel");
}

#endif

}  // namespace vlm::cpu

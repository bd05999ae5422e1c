// bf16 x bf16 -> f32 products on the CPU's bf16 dot-product instruction (AVX512_BF16's
// vdpbf16ps), the kernel of blas.h's bf16 gemm_ld where the CPU has it; not a public
// header. Not a BLAS: Debian 12's OpenBLAS is built without its bf16 GEMM.
//  - C[M,N] (row stride ldc) = alpha op(A) op(B) + beta C, A and B bf16 (row strides
//    lda, ldb), one thread; beta == 0 never reads C.
//  - Each element of C is one f32 sum over k in a fixed order, whatever the shape of the
//    call or where the element falls in it: per pair of k (2p, 2p+1), acc += a*b at
//    2p+1, then acc += a*b at 2p (vdpbf16ps: every product of two bf16 values is exact
//    in f32, each sum rounds to nearest even, subnormal inputs and results are flushed
//    to zero); an odd K ends with a zero pair. Then alpha * acc + beta * C. So C is
//    bitwise the same at any thread count and block layout (blas.cpp) on one CPU kind
//    (how a vendor's vdpbf16ps rounds its two sums is its own); it differs from the f32
//    GEMM of the bf16 values (gemm.cpp's path elsewhere) in the order of the sums only
//    (tests/core/test_gemm_bf16.cpp).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace vlm::cpu {

// True where the CPU has AVX512_BF16 (and this build has the kernel).
bool gemm_bf16_native();

// Requires gemm_bf16_native() and M, N, K >= 1.
void gemm_bf16_seq(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const bf16* A, int64_t lda,
                   const bf16* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace vlm::cpu

// CPU GEMM (core/ops/gemm.inc): matmul through OpenBLAS cblas_sgemm / cblas_dgemm, and
// bias_backward.
//  - 2-D: C[M,N] = alpha op(A) op(B) + beta C; batched: 3-D operands share the leading
//    batch size, a 2-D A or B is broadcast over the batch (C must then be 3-D), one BLAS
//    call per batch entry.
//  - Epilogue per row of C: + bias[N], then pre_gelu = C (if given), C = gelu(C).
//  - beta == 0 never reads C (it is zeroed first, so NaN garbage cannot leak in).
// Deterministic: OpenBLAS splits M/N between its threads, never K; bias_backward sums
// the rows of each column in row order.
#include <algorithm>
#include <cstring>

#include "core/cpu/blas.h"
#include "core/cpu/cpu_util.h"
#include "core/ops.h"

namespace vlm::cpu {
namespace {

// The [rows, cols] of the last two dims of a 2-D or 3-D operand, and its batch (1 for 2-D).
struct Mat {
  int64_t batch, rows, cols;
};
Mat mat_of(const Tensor& t, const char* what) {
  VLM_ASSERT(t.ndim() == 2 || t.ndim() == 3, "matmul: ", what, " must be 2-D or 3-D, got ", t.str());
  if (t.ndim() == 2) return {1, t.size(0), t.size(1)};
  return {t.size(0), t.size(1), t.size(2)};
}

template <typename T>
void matmul_impl(const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  Mat a = mat_of(A, "A"), b = mat_of(B, "B"), c = mat_of(C, "C");
  const int64_t M = o.trans_a ? a.cols : a.rows, K = o.trans_a ? a.rows : a.cols;
  const int64_t Kb = o.trans_b ? b.cols : b.rows, N = o.trans_b ? b.rows : b.cols;
  VLM_ASSERT(K == Kb, "matmul: inner dims differ: A ", A.str(), " B ", B.str(), " trans ", o.trans_a, o.trans_b);
  VLM_ASSERT(c.rows == M && c.cols == N, "matmul: C is ", C.str(), ", expected [", M, ",", N, "]");
  const bool batched = A.ndim() == 3 || B.ndim() == 3 || C.ndim() == 3;
  const int64_t nb = batched ? c.batch : 1;
  if (batched) {
    VLM_ASSERT(C.ndim() == 3, "matmul: batched operands need a 3-D C, got ", C.str());
    VLM_ASSERT(A.ndim() == 2 || a.batch == nb, "matmul: batch of A ", A.str(), " != batch of C ", C.str());
    VLM_ASSERT(B.ndim() == 2 || b.batch == nb, "matmul: batch of B ", B.str(), " != batch of C ", C.str());
  }
  const T* pa = A.ptr<T>();
  const T* pb = B.ptr<T>();
  T* pc = C.ptr<T>();
  const int64_t sa = A.ndim() == 3 ? M * K : 0, sb = B.ndim() == 3 ? K * N : 0, sc = M * N;
  if (o.beta == 0.f) std::memset(static_cast<void*>(pc), 0, C.nbytes());
  for (int64_t i = 0; i < nb; ++i) {
    if (M == 0 || N == 0) break;
    if (K == 0) {  // BLAS may return early: apply beta by hand
      for (int64_t j = 0; j < sc; ++j) pc[i * sc + j] *= T(o.beta);
      continue;
    }
    blas_gemm(o.trans_a, o.trans_b, M, N, K, o.alpha, pa + i * sa, pb + i * sb, o.beta, pc + i * sc);
  }
  if (!o.bias && !o.gelu) return;
  const T* bias = nullptr;
  if (o.bias) {
    check_tensor(*o.bias, C.dtype(), N, "matmul", "bias");
    bias = o.bias->ptr<T>();
  }
  T* pre = nullptr;
  if (o.gelu && o.pre_gelu) {
    check_same(*o.pre_gelu, C, "matmul", "pre_gelu");
    pre = o.pre_gelu->ptr<T>();
  }
  const int64_t rows = nb * M;
#pragma omp parallel for schedule(static) if (rows * N > kOmpMin)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = pc + r * N;
    for (int64_t j = 0; j < N; ++j) {
      T x = row[j];
      if (bias) x += bias[j];
      if (o.gelu) {
        if (pre) pre[r * N + j] = x;
        x = gelu_tanh(x);
      }
      row[j] = x;
    }
  }
}

template <typename T>
void bias_backward_impl(const Tensor& dbias, const Tensor& dout) {
  const int64_t N = dout.cols(), R = dout.rows();
  check_tensor(dbias, dout.dtype(), N, "bias_backward", "dbias");
  const T* g = dout.ptr<T>();
  T* db = dbias.ptr<T>();
  // Column blocks in parallel; inside a block rows are summed in order (fixed order).
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (N + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (R * N > kOmpMin)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t j0 = blk * kBlock, j1 = std::min(N, j0 + kBlock);
    T acc[kBlock] = {};
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g[r * N + j];
    for (int64_t j = j0; j < j1; ++j) db[j] += acc[j - j0];
  }
}

}  // namespace

void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  check_cpu(C, "matmul", "C");
  check_cpu(A, "matmul", "A");
  check_cpu(B, "matmul", "B");
  VLM_ASSERT(A.dtype() == C.dtype() && B.dtype() == C.dtype(), "matmul: dtypes differ: A ", A.str(), " B ",
             B.str(), " C ", C.str());
  dispatch_float(C.dtype(), "matmul", [&](auto tag) { matmul_impl<decltype(tag)>(C, A, B, o); });
}

void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) {
  check_cpu(dout, "bias_backward", "dout");
  dispatch_float(dout.dtype(), "bias_backward", [&](auto tag) { bias_backward_impl<decltype(tag)>(dbias, dout); });
}

}  // namespace vlm::cpu

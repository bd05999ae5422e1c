// gemm_shape (see gemm_shape.h).
#include "core/ops/gemm_shape.h"

namespace vlm {
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

}  // namespace

GemmShape gemm_shape(const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) {
  const Mat a = mat_of(A, "A"), b = mat_of(B, "B"), c = mat_of(C, "C");
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
  return {M, N, K, nb, A.ndim() == 3 ? M * K : 0, B.ndim() == 3 ? K * N : 0, M * N};
}

}  // namespace vlm

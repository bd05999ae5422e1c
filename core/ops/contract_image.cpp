// Contracts of core/ops/image.inc (see contract.h).
#include "core/ops/contract.h"

namespace vlm::contract {

void image_to_patches(const Op& op, const Tensor& out, const Tensor& in, int patch, const PixelNorm&) {
  op.on_device(in, "in");
  VLM_ASSERT(in.dtype() == DType::U8 && in.ndim() == 4 && in.size(1) == in.size(2) && in.size(3) == 3, op.name,
             ": in is ", in.str(), ", expected u8[B,S,S,3]");
  const int64_t B = in.size(0), S = in.size(1), P = patch;
  VLM_ASSERT(P >= 1 && S % P == 0, op.name, ": patch ", P, " does not divide the image side ", S);
  op.dtype(out, "out");
  const int64_t G = S / P, rows = B * G * G, K = 3 * P * P;
  VLM_ASSERT(out.numel() == rows * K && out.cols() == K, op.name, ": out is ", out.str(), ", expected [", rows, ", ",
             K, "]");
}

}  // namespace vlm::contract

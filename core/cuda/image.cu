// CUDA image_to_patches (core/ops/image.inc), f32 or bf16 out: one thread per output
// element (row = grid cell, column = (c, ky, kx) of a conv weight), v * scale first, then
// (x - mean) / std in f32, each step rounded (no FMA), as the CPU does; a bf16 out is
// that f32 value rounded once (cuda_util.cuh Act).
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

struct Norm3 {
  float scale, mean[3], std[3];
};

__global__ void image_to_patches_kernel(Act out, const uint8_t* in, int64_t n, int64_t S, int64_t P, int64_t G,
                                        Norm3 nm) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t K = 3 * P * P, r = i / K, col = i % K;
    const int64_t c = col / (P * P), ky = (col / P) % P, kx = col % P;
    const int64_t b = r / (G * G), gy = (r / G) % G, gx = r % G;
    const float v = float(in[((b * S + gy * P + ky) * S + gx * P + kx) * 3 + c]);
    out.st(i, __fdiv_rn(__fsub_rn(__fmul_rn(v, nm.scale), nm.mean[c]), nm.std[c]));  // no FMA contraction
  }
}

}  // namespace

void image_to_patches(Stream& s, const Tensor& out, const Tensor& in, int patch, const PixelNorm& n) {
  const int64_t B = in.size(0), S = in.size(1), P = patch;
  const int64_t G = S / P, K = 3 * P * P, total = B * G * G * K;
  if (total == 0) return;
  Norm3 nm{n.scale, {n.mean[0], n.mean[1], n.mean[2]}, {n.stddev[0], n.stddev[1], n.stddev[2]}};
  image_to_patches_kernel<<<grid_1d(total), kThreads, 0, stream_of(s)>>>(act(out), in.ptr<uint8_t>(), total, S, P,
                                                                          G, nm);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

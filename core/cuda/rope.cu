// CUDA rotary position embedding (core/ops/rope.inc) on x[T,NH,HS], f32, HS even, in the
// Llama/HF "rotate half" layout: the pair (i, i + HS/2) of each head of token t turns by
// angle pos[t] * theta^(-2i/HS). One thread per pair; it reads both elements before
// writing either, so out may alias in (and din alias dout).
// The angle is computed in f64 (then sin/cos in f64): with positions in the thousands an
// f32 angle would lose ~1e-4 rad, more than the CPU reference's rounding.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

// sign = +1: forward rotation; -1: the inverse rotation (backward).
__global__ void rope_kernel(float* out, const float* in, const int32_t* pos, double log_theta, int64_t pairs,
                            int64_t NH, int64_t HS, float sign) {
  const int64_t half = HS / 2;
  VLM_GRID_STRIDE(p, pairs) {
    const int64_t i = p % half;
    const int64_t row = p / half;  // row = t * NH + h
    const int64_t t = row / NH;
    const double angle = double(pos[t]) * exp(-double(2 * i) / double(HS) * log_theta);
    double sn, cs;
    sincos(angle, &sn, &cs);
    const float c = float(cs), s = sign * float(sn);
    const int64_t base = row * HS;
    const float x1 = in[base + i], x2 = in[base + i + half];
    out[base + i] = x1 * c - x2 * s;
    out[base + i + half] = x2 * c + x1 * s;
  }
}

void launch_rope(Stream& st, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, float sign) {
  const int64_t T = in.size(0), NH = in.size(1), HS = in.size(2);
  const int64_t pairs = T * NH * (HS / 2);
  if (pairs == 0) return;
  rope_kernel<<<grid_1d(pairs), kThreads, 0, stream_of(st)>>>(f32p(out), f32p(in), i32p(pos),
                                                              std::log(double(theta)), pairs, NH, HS, sign);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) {
  launch_rope(s, out, in, pos, theta, 1.f);
}

void rope_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) {
  launch_rope(s, din, dout, pos, theta, -1.f);
}

}  // namespace vlm::cuda

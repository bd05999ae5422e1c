// CUDA rotary position embedding (core/ops/rope.inc) on x[T,NH,HS], f32 or bf16 operands
// (cuda_util.cuh Act: f32 arithmetic, rounded once on store), HS even, in the
// Llama/HF "rotate half" layout: the pair (i, i + HS/2) of each head of token t turns by
// angle pos[t] * theta^(-2i/HS). One thread per pair; it reads both elements before
// writing either, so out may alias in (and din alias dout).
// The angle is computed in f64 (then sin/cos in f64): with positions in the thousands an
// f32 angle would lose ~1e-4 rad, more than the CPU reference's rounding.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

// sign = +1: forward rotation; -1: the inverse rotation (backward). pairs covers
// x[T,NH,HS], then (out2/in2 not null: rope_qk's k, in place) x2[T,NH2,HS].
__global__ void rope_kernel(Act out, Act in, const int32_t* pos, double log_theta, int64_t pairs, int64_t NH,
                            int64_t HS, float sign, Act out2, int64_t NH2) {
  const int64_t half = HS / 2;
  VLM_GRID_STRIDE(p0, pairs) {
    int64_t p = p0, nh = NH;
    Act o = out, x = in;
    const int64_t first = pairs - (out2 ? (pairs / (NH + NH2)) * NH2 : 0);  // pairs of x
    if (p >= first) p -= first, nh = NH2, o = out2, x = out2;
    const int64_t i = p % half;
    const int64_t row = p / half;  // row = t * nh + h
    const int64_t t = row / nh;
    const double angle = double(pos[t]) * exp(-double(2 * i) / double(HS) * log_theta);
    double sn, cs;
    sincos(angle, &sn, &cs);
    const float c = float(cs), s = sign * float(sn);
    const int64_t base = row * HS;
    const float x1 = x.ld(base + i), x2 = x.ld(base + i + half);
    o.st(base + i, x1 * c - x2 * s);
    o.st(base + i + half, x2 * c + x1 * s);
  }
}

// out = rope(in) on [T,NH,HS]; k (defined: rope_qk) rotated in place in the same launch.
void launch_rope(Stream& st, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, float sign,
                 const Tensor& k = Tensor{}) {
  const int64_t T = in.size(0), NH = in.size(1), HS = in.size(2), NH2 = k.defined() ? k.size(1) : 0;
  const int64_t pairs = T * (NH + NH2) * (HS / 2);
  if (pairs == 0) return;
  rope_kernel<<<grid_1d(pairs), kThreads, 0, stream_of(st)>>>(act(out), act(in), i32p(pos),
                                                              std::log(double(theta)), pairs, NH, HS, sign, act(k),
                                                              NH2);
  CUDA_CHECK_LAUNCH();
}

void rope(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, float sign) {
  launch_rope(s, out, in, pos, theta, sign);
}

void rope_qk(Stream& s, const Tensor& q, const Tensor& k, const Tensor& pos, float theta, float sign) {
  launch_rope(s, q, q, pos, theta, sign, k);
}

}  // namespace

void rope_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) {
  rope(s, out, in, pos, theta, 1.f);
}

void rope_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) {
  rope(s, din, dout, pos, theta, -1.f);
}

void rope_qk_forward(Stream& s, const Tensor& q, const Tensor& k, const Tensor& pos, float theta) {
  rope_qk(s, q, k, pos, theta, 1.f);
}

void rope_qk_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& pos, float theta) {
  rope_qk(s, dq, dk, pos, theta, -1.f);
}

}  // namespace vlm::cuda

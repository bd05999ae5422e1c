// CUDA rotary position embedding (core/ops/rope.inc) on x[T,NH,HS], f32 or bf16 operands
// (cuda_util.cuh Act: f32 arithmetic, rounded once on store), HS even, in the
// Llama/HF "rotate half" layout: the pair (i, i + HS/2) of each head of token t turns by
// angle pos[t] * theta^(-2i/HS). Each pair is turned by one thread, which reads both
// elements before writing either, so out may alias in (and din alias dout).
// The angle is computed in f64 (then sin/cos in f64): with positions in the thousands an
// f32 angle would lose ~1e-4 rad, more than the CPU reference's rounding.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

// One head's pair (i, i + half) at row offset base, turned by (c, s).
__device__ __forceinline__ void turn(Act o, Act x, int64_t base, int64_t i, int64_t half, float c, float s) {
  const float x1 = x.ld(base + i), x2 = x.ld(base + i + half);
  o.st(base + i, x1 * c - x2 * s);
  o.st(base + i + half, x2 * c + x1 * s);
}

// sign = +1: forward rotation; -1: the inverse rotation (backward). One block per token
// t: the sine and cosine of its HS/2 angles once (in f64, the costly part) into shared
// memory, then the pairs of every head of x[T,NH,HS] and (out2 not null: rope_qk's k, in
// place) of x2[T,NH2,HS], one pair per thread, consecutive threads on consecutive i.
__global__ void rope_kernel(Act out, Act in, const int32_t* pos, double log_theta, int64_t NH, int64_t HS,
                            float sign, Act out2, int64_t NH2) {
  extern __shared__ float turn_by[];  // cos of angle i at [i], sign * sin at [half + i]
  const int64_t half = HS / 2, t = blockIdx.x;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const double angle = double(pos[t]) * exp(-double(2 * i) / double(HS) * log_theta);
    double sn, cs;
    sincos(angle, &sn, &cs);
    turn_by[i] = float(cs);
    turn_by[half + i] = sign * float(sn);
  }
  __syncthreads();
  const int64_t n1 = NH * half, n = (NH + NH2) * half;
  for (int64_t p = threadIdx.x; p < n; p += blockDim.x) {
    const bool k = p >= n1;
    const int64_t q = k ? p - n1 : p, h = q / half, i = q % half;
    const float c = turn_by[i], s = turn_by[half + i];
    if (k)
      turn(out2, out2, (t * NH2 + h) * HS, i, half, c, s);
    else
      turn(out, in, (t * NH + h) * HS, i, half, c, s);
  }
}

// out = rope(in) on [T,NH,HS]; k (defined: rope_qk) rotated in place in the same launch.
void launch_rope(Stream& st, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, float sign,
                 const Tensor& k = Tensor{}) {
  const int64_t T = in.size(0), NH = in.size(1), HS = in.size(2), NH2 = k.defined() ? k.size(1) : 0;
  if (T == 0 || HS == 0) return;
  VLM_ASSERT(T < (int64_t(1) << 31) && HS <= 8192, "rope: ", T, " tokens of head size ", HS,
             " is beyond one launch (2^31 blocks, 32 KiB of shared memory)");
  rope_kernel<<<unsigned(T), kThreads, size_t(HS) * sizeof(float), stream_of(st)>>>(
      act(out), act(in), i32p(pos), std::log(double(theta)), NH, HS, sign, act(k), NH2);
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

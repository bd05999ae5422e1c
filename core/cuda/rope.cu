// CUDA rotary position embedding (core/ops/rope.inc) on x[T,NH,HS], f32 or bf16 operands
// (cuda_util.cuh Act: f32 arithmetic, rounded once on store), HS even, in the
// Llama/HF "rotate half" layout: the pair (i, i + HS/2) of each head of token t turns by
// angle pos[t] * theta^(-2i/HS). Each pair (four neighbouring pairs where HS is a
// multiple of 8 and the operands allow 16-byte accesses: Lanes<4>) is turned by one
// thread, which reads both elements before writing either, so out may alias in (and din
// alias dout).
// The angle is computed in f64 (then sin/cos in f64): with positions in the thousands an
// f32 angle would lose ~1e-4 rad, more than the CPU reference's rounding.
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

// One head's pairs (i + k, i + k + half), k < W, at row offset base, turned by the
// cosines at cs[i + k] and the signed sines at cs[half + i + k].
template <int W>
__device__ __forceinline__ void turn(Act o, Act x, int64_t base, int64_t i, int64_t half, const float* cs) {
  Lanes<W> x1 = load<W>(x, base + i), x2 = load<W>(x, base + i + half);
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const float c = cs[i + k], s = cs[half + i + k], a = x1.v[k], b = x2.v[k];
    x1.v[k] = a * c - b * s;
    x2.v[k] = b * c + a * s;
  }
  store<W>(o, base + i, x1);
  store<W>(o, base + i + half, x2);
}

// sign = +1: forward rotation; -1: the inverse rotation (backward). One block per token
// t: the sine and cosine of its HS/2 angles once (in f64, the costly part) into shared
// memory, then the pairs of every head of x[T,NH,HS] and (out2 not null: rope_qk's k, in
// place) of x2[T,NH2,HS], W pairs per thread, consecutive threads on consecutive i.
template <int W>
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
  for (int64_t p = W * int64_t(threadIdx.x); p < n; p += W * int64_t(blockDim.x)) {
    const bool k = p >= n1;
    const int64_t q = k ? p - n1 : p, h = q / half, i = q % half;
    if (k)
      turn<W>(out2, out2, (t * NH2 + h) * HS, i, half, turn_by);
    else
      turn<W>(out, in, (t * NH + h) * HS, i, half, turn_by);
  }
}

// out = rope(in) on [T,NH,HS]; k (defined: rope_qk) rotated in place in the same launch.
void launch_rope(Stream& st, const Tensor& out, const Tensor& in, const Tensor& pos, float theta, float sign,
                 const Tensor& k = Tensor{}) {
  const int64_t T = in.size(0), NH = in.size(1), HS = in.size(2), NH2 = k.defined() ? k.size(1) : 0;
  if (T == 0 || HS == 0) return;
  VLM_ASSERT(T < (int64_t(1) << 31) && HS <= 8192, "rope: ", T, " tokens of head size ", HS,
             " is beyond one launch (2^31 blocks, 32 KiB of shared memory)");
  // Four pairs at a time: i and i + HS/2 multiples of 4 (HS of 8), every operand aligned.
  auto kernel = rows_by_four(HS / 2, {act(out), act(in), act(k)}) ? rope_kernel<4> : rope_kernel<1>;
  kernel<<<unsigned(T), kThreads, size_t(HS) * sizeof(float), stream_of(st)>>>(
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

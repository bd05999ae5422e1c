// CUDA softmax over the last dimension of in[N,C] (core/ops/softmax.inc), f32.
// One block per row: max, then sum of exp(x - max), both block reductions in f32;
// out = exp(x - max) / sum. Backward: din = out * (dout - sum(dout * out)); the row sum
// is complete before any din is written and each element is read and written by the
// same thread, so din may alias dout.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void softmax_forward_kernel(float* out, const float* in, int64_t C) {
  const float* x = in + int64_t(blockIdx.x) * C;
  float* y = out + int64_t(blockIdx.x) * C;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_max(m);
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += expf(x[i] - m);
  const float inv = 1.f / block_sum(s);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) y[i] = expf(x[i] - m) * inv;
}

__global__ void softmax_backward_kernel(float* din, const float* dout, const float* out, int64_t C) {
  const int64_t off = int64_t(blockIdx.x) * C;
  float d = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) d += dout[off + i] * out[off + i];
  d = block_sum(d);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) din[off + i] = out[off + i] * (dout[off + i] - d);
}

}  // namespace

void softmax_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0 || C == 0) return;
  softmax_forward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(out), f32p(in), C);
  CUDA_CHECK_LAUNCH();
}

void softmax_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& out) {
  const int64_t N = out.rows(), C = out.cols();
  if (N == 0 || C == 0) return;
  softmax_backward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(din), f32p(dout), f32p(out), C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

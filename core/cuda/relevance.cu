// CUDA ops of the relevance scorers (core/ops/relevance.inc), f32: elementwise sigmoid
// and per-row (mean, max, std), one block per row with f32 block reductions. The
// maximum's gradient goes to its first occurrence (smallest index equal to the max), as
// on the CPU. In the backward the statistics are read before any din is written and
// each element is read and written by the same thread.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void sigmoid_forward_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.f / (1.f + expf(-x[i]));
}

__global__ void sigmoid_backward_kernel(float* d, const float* g, const float* y, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) d[i] = g[i] * y[i] * (1.f - y[i]);
}

__global__ void row_stats_forward_kernel(float* out, const float* in, int64_t C, float eps) {
  const float* x = in + int64_t(blockIdx.x) * C;
  float s = 0.f, m = -INFINITY;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) s += x[i], m = fmaxf(m, x[i]);
  const float mean = block_sum(s) / float(C);
  m = block_max(m);
  float v = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) v += (x[i] - mean) * (x[i] - mean);
  v = block_sum(v);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = mean;
    out[blockIdx.x * 3 + 1] = m;
    out[blockIdx.x * 3 + 2] = sqrtf(v / float(C) + eps);
  }
}

__global__ void row_stats_backward_kernel(float* din, const float* dout, const float* in, const float* out,
                                          int64_t C) {
  const int64_t off = int64_t(blockIdx.x) * C;
  const float mean = out[blockIdx.x * 3], mx = out[blockIdx.x * 3 + 1], sd = out[blockIdx.x * 3 + 2];
  const float gm = dout[blockIdx.x * 3] / float(C), gx = dout[blockIdx.x * 3 + 1];
  const float gs = dout[blockIdx.x * 3 + 2] / (float(C) * sd);
  float first = -INFINITY;  // -(smallest index holding the maximum)
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
    if (in[off + i] == mx) first = fmaxf(first, -float(i));
  first = block_max(first);
  const int64_t arg = first == -INFINITY ? 0 : int64_t(-first);
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
    din[off + i] = gm + gs * (in[off + i] - mean) + (i == arg ? gx : 0.f);
}

}  // namespace

void sigmoid_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t n = in.numel();
  if (n == 0) return;
  sigmoid_forward_kernel<<<unsigned((n + 255) / 256), 256, 0, stream_of(s)>>>(f32p(out), f32p(in), n);
  CUDA_CHECK_LAUNCH();
}

void sigmoid_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  sigmoid_backward_kernel<<<unsigned((n + 255) / 256), 256, 0, stream_of(s)>>>(f32p(din), f32p(dout), f32p(out), n);
  CUDA_CHECK_LAUNCH();
}

void row_stats_forward(Stream& s, const Tensor& out, const Tensor& in, float eps) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0) return;
  row_stats_forward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(out), f32p(in), C, eps);
  CUDA_CHECK_LAUNCH();
}

void row_stats_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& out) {
  const int64_t N = in.rows(), C = in.cols();
  if (N == 0) return;
  row_stats_backward_kernel<<<unsigned(N), kRowThreads, 0, stream_of(s)>>>(f32p(din), f32p(dout), f32p(in),
                                                                             f32p(out), C);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

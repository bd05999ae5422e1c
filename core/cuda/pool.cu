// CUDA average pooling, NCHW, f32 (core/ops/conv.inc): k x k windows with a stride, no
// padding; out[B,C,Ho,Wo], Ho = (H - k)/stride + 1.
// Forward: one thread per output, the mean of its window.
// Backward as a gather: one thread per input element sums dout/(k*k) over the output
// windows that contain it (oy with oy*stride <= y < oy*stride + k), so overlapping
// windows need no atomics and din is overwritten in a fixed order.
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void avgpool_forward_kernel(float* out, const float* in, int64_t n, int64_t H, int64_t W, int64_t Ho,
                                       int64_t Wo, int k, int stride) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t ox = i % Wo, oy = (i / Wo) % Ho, plane = i / (Wo * Ho);
    const float* p = in + plane * H * W + (oy * stride) * W + ox * stride;
    float acc = 0.f;
    for (int dy = 0; dy < k; ++dy)
      for (int dx = 0; dx < k; ++dx) acc += p[dy * W + dx];
    out[i] = acc / float(k * k);
  }
}

// Output windows along one axis that contain input coordinate y: [lo, hi].
__device__ __forceinline__ void windows(int64_t y, int k, int stride, int64_t n_out, int64_t& lo, int64_t& hi) {
  lo = y - k + 1 <= 0 ? 0 : (y - k + 1 + stride - 1) / stride;
  hi = min(y / stride, n_out - 1);
}

__global__ void avgpool_backward_kernel(float* din, const float* dout, int64_t n, int64_t H, int64_t W, int64_t Ho,
                                        int64_t Wo, int k, int stride) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t x = i % W, y = (i / W) % H, plane = i / (W * H);
    int64_t y0, y1, x0, x1;
    windows(y, k, stride, Ho, y0, y1);
    windows(x, k, stride, Wo, x0, x1);
    const float* g = dout + plane * Ho * Wo;
    float acc = 0.f;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox) acc += g[oy * Wo + ox];
    din[i] = acc / float(k * k);
  }
}

struct PoolDims {
  int64_t planes, H, W, Ho, Wo;
};

PoolDims pool_dims(const Tensor& in, int k, int stride) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), (in.size(2) - k) / stride + 1,
          (in.size(3) - k) / stride + 1};
}

}  // namespace

void avgpool2d_forward(Stream& s, const Tensor& out, const Tensor& in, int k, int stride) {
  const PoolDims d = pool_dims(in, k, stride);
  const int64_t n = out.numel();
  if (n == 0) return;
  avgpool_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(out), f32p(in), n, d.H, d.W, d.Ho, d.Wo,
                                                                     k, stride);
  CUDA_CHECK_LAUNCH();
}

void avgpool2d_backward(Stream& s, const Tensor& din, const Tensor& dout, int k, int stride) {
  const PoolDims d = pool_dims(din, k, stride);
  const int64_t n = din.numel();
  if (n == 0) return;
  avgpool_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(din), f32p(dout), n, d.H, d.W, d.Ho,
                                                                      d.Wo, k, stride);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

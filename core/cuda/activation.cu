// CUDA activations (core/ops/elementwise.inc, second part): tanh-GELU and SwiGLU,
// forward and backward, f32. Each element is read and written by one thread, so the
// aliasing the declarations allow (din == dout) is safe: a thread reads all its inputs
// before it writes.
//   gelu(x)  = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   swiglu   = silu(g) * u,  silu(g) = g * sigmoid(g)
//   dgate    = dout * u * sigmoid(g) * (1 + g (1 - sigmoid(g))),  dup = dout * silu(g)
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void gelu_forward_kernel(float* out, const float* in, int64_t n) {
  VLM_GRID_STRIDE(i, n) out[i] = gelu_f(in[i]);
}
__global__ void gelu_backward_kernel(float* din, const float* in, const float* dout, int64_t n) {
  VLM_GRID_STRIDE(i, n) din[i] = dout[i] * gelu_grad_f(in[i]);
}

__device__ __forceinline__ float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float g = gate[i];
    out[i] = g * sigmoid_f(g) * up[i];
  }
}
__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate,
                                       const float* up, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float g = gate[i], u = up[i], d = dout[i], sg = sigmoid_f(g);
    dgate[i] = d * u * sg * (1.f + g * (1.f - sg));
    dup[i] = d * g * sg;
  }
}

}  // namespace

void gelu_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  gelu_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(out), f32p(in), n);
  CUDA_CHECK_LAUNCH();
}

void gelu_backward(Stream& s, const Tensor& din, const Tensor& in, const Tensor& dout) {
  const int64_t n = din.numel();
  if (n == 0) return;
  gelu_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(din), f32p(in), f32p(dout), n);
  CUDA_CHECK_LAUNCH();
}

void swiglu_forward(Stream& s, const Tensor& out, const Tensor& gate, const Tensor& up) {
  const int64_t n = out.numel();
  if (n == 0) return;
  swiglu_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(out), f32p(gate), f32p(up), n);
  CUDA_CHECK_LAUNCH();
}

void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  const int64_t n = dout.numel();
  if (n == 0) return;
  swiglu_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(dgate), f32p(dup), f32p(dout),
                                                                     f32p(gate), f32p(up), n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

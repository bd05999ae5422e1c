// CUDA activations (core/ops/elementwise.inc, second part): tanh-GELU and SwiGLU,
// forward and backward, on f32 or bf16 operands (cuda_util.cuh Act: f32 arithmetic); the
// SwiGLU backward also writes the forward's value again when asked (the fused SwiGLU:
// docs/ops.md, "Fused ops"). Each element is read and written by one thread, so the
// aliasing the declarations allow (din == dout) is safe: a thread reads all its inputs
// before it writes.
//   gelu(x)  = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   swiglu   = silu(g) * u,  silu(g) = g * sigmoid(g)
//   dgate    = dout * u * sigmoid(g) * (1 + g (1 - sigmoid(g))),  dup = dout * silu(g)
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void gelu_forward_kernel(Act out, Act in, int64_t n) {
  VLM_GRID_STRIDE(i, n) out.st(i, gelu_f(in.ld(i)));
}
__global__ void gelu_backward_kernel(Act din, Act in, Act dout, int64_t n) {
  VLM_GRID_STRIDE(i, n) din.st(i, dout.ld(i) * gelu_grad_f(in.ld(i)));
}

__device__ __forceinline__ float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void swiglu_forward_kernel(Act out, Act gate, Act up, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float g = gate.ld(i);
    out.st(i, g * sigmoid_f(g) * up.ld(i));
  }
}
// out (not null): silu(g) * u again, as swiglu_forward_kernel computes it.
__global__ void swiglu_backward_kernel(Act dgate, Act dup, Act out, Act dout, Act gate, Act up, int64_t n) {
  VLM_GRID_STRIDE(i, n) {
    const float g = gate.ld(i), u = up.ld(i), d = dout.ld(i), sg = sigmoid_f(g);
    dgate.st(i, d * u * sg * (1.f + g * (1.f - sg)));
    dup.st(i, d * g * sg);
    if (out) out.st(i, g * sg * u);
  }
}

}  // namespace

void gelu_forward(Stream& s, const Tensor& out, const Tensor& in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  gelu_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(act(out), act(in), n);
  CUDA_CHECK_LAUNCH();
}

void gelu_backward(Stream& s, const Tensor& din, const Tensor& in, const Tensor& dout) {
  const int64_t n = din.numel();
  if (n == 0) return;
  gelu_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(act(din), act(in), act(dout), n);
  CUDA_CHECK_LAUNCH();
}

void swiglu_forward(Stream& s, const Tensor& out, const Tensor& gate, const Tensor& up) {
  const int64_t n = out.numel();
  if (n == 0) return;
  swiglu_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(act(out), act(gate), act(up), n);
  CUDA_CHECK_LAUNCH();
}

void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& out, const Tensor& dout,
                     const Tensor& gate, const Tensor& up) {
  const int64_t n = dout.numel();
  if (n == 0) return;
  swiglu_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(act(dgate), act(dup), act(out), act(dout),
                                                                     act(gate), act(up), n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

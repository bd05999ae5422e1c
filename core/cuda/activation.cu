// CUDA activations (core/ops/elementwise.inc, second part): tanh-GELU and SwiGLU,
// forward and backward, on f32 or bf16 operands (cuda_util.cuh Act: f32 arithmetic); the
// SwiGLU backward also writes the forward's value again when asked (the fused SwiGLU:
// docs/ops.md, "Fused ops"). Each element is read and written by one thread (SwiGLU:
// four consecutive ones where the operands are 16-byte aligned), so the aliasing the
// declarations allow (din == dout) is safe: a thread reads all its inputs before it
// writes.
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

__device__ __forceinline__ float swiglu_f(float g, float u) { return g * sigmoid_f(g) * u; }
__device__ __forceinline__ void swiglu_grad_f(float g, float u, float d, float& dg, float& du, float& o) {
  const float sg = sigmoid_f(g);
  dg = d * u * sg * (1.f + g * (1.f - sg));
  du = d * g * sg;
  o = g * sg * u;
}

// Elements [0, 4 n4) four at a time (ld4/st4: vec4_ok operands), the rest one at a time.
__global__ void swiglu_forward_kernel(Act out, Act gate, Act up, int64_t n, int64_t n4) {
  VLM_GRID_STRIDE(j, n4) {
    const float4 g = gate.ld4(4 * j), u = up.ld4(4 * j);
    out.st4(4 * j, make_float4(swiglu_f(g.x, u.x), swiglu_f(g.y, u.y), swiglu_f(g.z, u.z), swiglu_f(g.w, u.w)));
  }
  VLM_GRID_STRIDE(k, n - 4 * n4) {
    const int64_t i = 4 * n4 + k;
    out.st(i, swiglu_f(gate.ld(i), up.ld(i)));
  }
}
// out (not null): silu(g) * u again, as swiglu_forward_kernel computes it.
__global__ void swiglu_backward_kernel(Act dgate, Act dup, Act out, Act dout, Act gate, Act up, int64_t n,
                                       int64_t n4) {
  VLM_GRID_STRIDE(j, n4) {
    const float4 g = gate.ld4(4 * j), u = up.ld4(4 * j), d = dout.ld4(4 * j);
    float4 dg, du, o;
    swiglu_grad_f(g.x, u.x, d.x, dg.x, du.x, o.x);
    swiglu_grad_f(g.y, u.y, d.y, dg.y, du.y, o.y);
    swiglu_grad_f(g.z, u.z, d.z, dg.z, du.z, o.z);
    swiglu_grad_f(g.w, u.w, d.w, dg.w, du.w, o.w);
    dgate.st4(4 * j, dg);
    dup.st4(4 * j, du);
    if (out) out.st4(4 * j, o);
  }
  VLM_GRID_STRIDE(k, n - 4 * n4) {
    const int64_t i = 4 * n4 + k;
    float dg, du, o;
    swiglu_grad_f(gate.ld(i), up.ld(i), dout.ld(i), dg, du, o);
    dgate.st(i, dg);
    dup.st(i, du);
    if (out) out.st(i, o);
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
  const int64_t n4 = quads(n, {act(out), act(gate), act(up)});
  swiglu_forward_kernel<<<grid_1d(std::max(n4, n - 4 * n4)), kThreads, 0, stream_of(s)>>>(act(out), act(gate),
                                                                                         act(up), n, n4);
  CUDA_CHECK_LAUNCH();
}

void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& out, const Tensor& dout,
                     const Tensor& gate, const Tensor& up) {
  const int64_t n = dout.numel();
  if (n == 0) return;
  const int64_t n4 = quads(n, {act(dgate), act(dup), act(out), act(dout), act(gate), act(up)});
  swiglu_backward_kernel<<<grid_1d(std::max(n4, n - 4 * n4)), kThreads, 0, stream_of(s)>>>(
      act(dgate), act(dup), act(out), act(dout), act(gate), act(up), n, n4);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

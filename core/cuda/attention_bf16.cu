// bf16 attention through our f32 kernels (attention_cudnn.h): the route for the shapes
// cuDNN's fused attention does not take. The bf16 operands are widened into f32 copies
// in the stream's scratch, our kernels run on them, and the results are rounded to bf16
// once (lse stays f32). Slower than cuDNN by the copies; the same numbers as the CPU's
// reference up to the order of the f32 sums.
#include "core/cuda/attention_cudnn.h"
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

// f32 views carved from one scratch block, 256-byte aligned each.
class F32Views {
 public:
  F32Views(CudaStream& cs, std::initializer_list<const Tensor*> ts) {
    size_t bytes = 0;
    for (const Tensor* t : ts) bytes += aligned(size_t(t->numel()) * 4);
    char* p = static_cast<char*>(cs.scratch(bytes));
    for (const Tensor* t : ts) {
      views_.emplace_back(p, t->shape(), DType::F32, DeviceKind::CUDA);
      p += aligned(size_t(t->numel()) * 4);
    }
  }
  const Tensor& operator[](size_t i) const { return views_[i]; }

 private:
  static size_t aligned(size_t b) { return (b + 255) / 256 * 256; }
  std::vector<Tensor> views_;
};

}  // namespace

void attention_forward_bf16(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  const F32Views f(cuda_stream(s), {&q, &k, &v, &out});
  for (size_t i = 0; i < 3; ++i) cuda::convert(s, f[i], i == 0 ? q : i == 1 ? k : v);
  cuda::attention_forward(s, f[3], lse, f[0], f[1], f[2], cu_seqlens, max_seqlen, causal);
  cuda::convert(s, out, f[3]);
}

void attention_backward_bf16(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  const F32Views f(cuda_stream(s), {&dout, &q, &k, &v, &out, &dq, &dk, &dv});
  const Tensor* in[] = {&dout, &q, &k, &v, &out};
  for (size_t i = 0; i < 5; ++i) cuda::convert(s, f[i], *in[i]);
  cuda::attention_backward(s, f[5], f[6], f[7], f[0], f[1], f[2], f[3], f[4], lse, cu_seqlens, max_seqlen, causal);
  cuda::convert(s, dq, f[5]);
  cuda::convert(s, dk, f[6]);
  cuda::convert(s, dv, f[7]);
}

}  // namespace vlm::cuda

// attention_scratch_bytes and attention_paths (core/ops.h): what the CUDA routes of
// attention (core/cuda/attention_cudnn.h) need and did, asked from outside core/cuda/.
#include <algorithm>

#include "core/ops.h"

#ifdef VLM_HAS_CUDA
namespace vlm::cuda {
class CudaStream;
CudaStream& cuda_stream(Stream& s);
std::vector<std::string> attention_paths(CudaStream& s);
}  // namespace vlm::cuda
#endif

namespace vlm {

size_t attention_scratch_bytes(DeviceKind d, DType dtype, int64_t tokens, int64_t nh, int64_t nkv, int64_t hs) {
  if (d != DeviceKind::CUDA || dtype != DType::BF16 || tokens <= 0) return 0;
  const auto T = size_t(tokens), H = size_t(nh), KV = size_t(nkv), D = size_t(hs);
  // cuDNN's backward (the larger): tokens rounded up to a power of two (>= 64) for its
  // f32 dQ accumulator and softmax sums, plus full-head f32 dK and dV under GQA, plus
  // the engine's own (a few MiB, bounded by 8), plus 4 int32 arrays of lengths/offsets.
  size_t t_cap = 64;
  while (t_cap < T) t_cap *= 2;
  const size_t cudnn = t_cap * H * (D + 1) * 4 + (KV != H ? 2 * t_cap * H * D * 4 : 0) + (size_t(8) << 20) +
                       4 * ((T + 1) * 4 + 256);
  // Our kernels on f32 copies (the backward's 8 tensors), each 256-byte aligned.
  const size_t ours = 4 * (T * H * D + T * KV * D) * 4 + 8 * 256;
  return std::max(cudnn, ours);
}

std::vector<std::string> attention_paths(Stream& s) {
#ifdef VLM_HAS_CUDA
  if (s.device() == DeviceKind::CUDA) return cuda::attention_paths(cuda::cuda_stream(s));
#endif
  return {};
}

}  // namespace vlm

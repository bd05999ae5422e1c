// CUDA copy (core/ops/elementwise.inc): dst = src as bytes, any dtype, one
// cudaMemcpyAsync device-to-device on the op's stream (ordered with the stream's other
// work, the host does not wait).
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/ops.h"

namespace vlm::cuda {

void copy(Stream& s, const Tensor& dst, const Tensor& src) {
  VLM_ASSERT(dst.defined() && src.defined(), "copy: undefined tensor");
  VLM_ASSERT(dst.device() == DeviceKind::CUDA && src.device() == DeviceKind::CUDA, "copy: dst ", dst.str(),
             " src ", src.str(), ": expected cuda tensors");
  VLM_ASSERT(dst.dtype() == src.dtype() && dst.numel() == src.numel(), "copy: dst ", dst.str(), " src ",
             src.str(), ": dtype and element count must agree");
  if (dst.data() == src.data() || src.numel() == 0) return;
  const size_t n = src.nbytes();
  const char* d = static_cast<const char*>(dst.data());
  const char* p = static_cast<const char*>(src.data());
  VLM_ASSERT(d + n <= p || p + n <= d, "copy: dst ", dst.str(), " and src ", src.str(), " overlap");
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), n, cudaMemcpyDeviceToDevice, stream_of(s)));
}

}  // namespace vlm::cuda

// CUDA copy, copy_from_host and copy_to_host (core/ops/elementwise.inc): dst = src as
// bytes, any dtype, one cudaMemcpyAsync on the op's stream (ordered with the stream's
// other work, not with the other streams). The host does not wait, but for
// copy_to_host, which synchronises the op's stream so that dst holds the values.
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/ops.h"

namespace vlm::cuda {

void copy(Stream& s, const Tensor& dst, const Tensor& src) {
  if (dst.data() == src.data() || src.numel() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_of(s)));
}

void copy_from_host(Stream& s, const Tensor& dst, const Tensor& src) {
  if (src.numel() == 0) return;
  // Pageable source: the call returns once the driver has staged it (src reusable).
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyHostToDevice, stream_of(s)));
}

void copy_to_host(Stream& s, const Tensor& dst, const Tensor& src) {
  if (src.numel() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream_of(s)));
  CUDA_CHECK(cudaStreamSynchronize(stream_of(s)));
}

}  // namespace vlm::cuda

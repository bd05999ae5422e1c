// CUDA copy, copy_from_host and copy_to_host (core/ops/elementwise.inc): dst = src as
// bytes, any dtype, one cudaMemcpyAsync on the op's stream (ordered with the stream's
// other work, not with the other streams). The host does not wait, but for
// copy_to_host, which synchronises the op's stream so that dst holds the values.
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

namespace {

void check_pair(const char* op, const Tensor& dst, DeviceKind dst_dev, const Tensor& src, DeviceKind src_dev) {
  VLM_ASSERT(dst.defined() && src.defined(), op, ": undefined tensor");
  VLM_ASSERT(dst.device() == dst_dev && src.device() == src_dev, op, ": dst ", dst.str(), " src ", src.str(),
             ": expected dst on ", device_name(dst_dev), " and src on ", device_name(src_dev));
  VLM_ASSERT(dst.dtype() == src.dtype() && dst.numel() == src.numel(), op, ": dst ", dst.str(), " src ", src.str(),
             ": dtype and element count must agree");
}

}  // namespace

void copy_from_host(Stream& s, const Tensor& dst, const Tensor& src) {
  check_pair("copy_from_host", dst, DeviceKind::CUDA, src, DeviceKind::CPU);
  if (src.numel() == 0) return;
  // Pageable source: the call returns once the driver has staged it (src reusable).
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyHostToDevice, stream_of(s)));
}

void copy_to_host(Stream& s, const Tensor& dst, const Tensor& src) {
  check_pair("copy_to_host", dst, DeviceKind::CPU, src, DeviceKind::CUDA);
  if (src.numel() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream_of(s)));
  CUDA_CHECK(cudaStreamSynchronize(stream_of(s)));
}

}  // namespace vlm::cuda

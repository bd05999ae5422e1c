// CUDA embedding lookup for a (possibly vocab-parallel) table shard
// (core/ops/embedding.inc), f32 table, i32 ids. table[V,C] holds vocabulary rows
// [vocab_offset, vocab_offset + V); ids outside the shard read as 0 and receive no
// gradient. One thread per output element (coalesced along C).
// Backward accumulates with f32 atomicAdd (repeated ids add up; the order of the adds
// varies, so the last bits may differ between runs).
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void embedding_forward_kernel(float* out, const int32_t* ids, const float* table, int64_t n, int64_t C,
                                         int64_t V, int64_t offset) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t row = int64_t(ids[i / C]) - offset;
    out[i] = (row >= 0 && row < V) ? table[row * C + i % C] : 0.f;
  }
}

__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int32_t* ids, int64_t n,
                                          int64_t C, int64_t V, int64_t offset) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t row = int64_t(ids[i / C]) - offset;
    if (row >= 0 && row < V) atomicAdd(dtable + row * C + i % C, dout[i]);
  }
}

}  // namespace

void embedding_forward(Stream& s, const Tensor& out, const Tensor& ids, const Tensor& table, int64_t vocab_offset) {
  const int64_t V = table.size(0), C = table.size(1), T = ids.numel();
  const int64_t n = T * C;
  if (n == 0) return;
  embedding_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(out), i32p(ids), f32p(table), n, C, V,
                                                                       vocab_offset);
  CUDA_CHECK_LAUNCH();
}

void embedding_backward(Stream& s, const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t vocab_offset) {
  const int64_t V = dtable.size(0), C = dtable.size(1), T = ids.numel();
  const int64_t n = T * C;
  if (n == 0) return;
  embedding_backward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(dtable), f32p(dout), i32p(ids), n, C,
                                                                        V, vocab_offset);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

// The aux kernels of cuDNN's attention route (attention_cudnn.h): the sequence lengths
// and ragged offsets of the packed samples, read from cu_seqlens on the device (no copy
// to the host, no synchronisation), and the rows past the last sample, which cuDNN
// never writes (the op defines them as 0).
#include "core/cuda/attention_cudnn.h"
#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

__global__ void ragged_offsets_kernel(const int32_t* cu, int B, int64_t q_row, int64_t kv_row, int64_t st_row,
                                      int32_t* seq_len, int32_t* off_q, int32_t* off_kv, int32_t* off_st) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= B; b += gridDim.x * blockDim.x) {
    const int64_t c = cu[b];
    off_q[b] = int32_t(c * q_row);
    off_kv[b] = int32_t(c * kv_row);
    off_st[b] = int32_t(c * st_row);
    if (b < B) seq_len[b] = cu[b + 1] - cu[b];
  }
}

__global__ void zero_tail_kernel(uint32_t* x, const int32_t* cu, int B, int64_t words_per_row, int64_t rows) {
  const int64_t begin = int64_t(cu[B]) * words_per_row, end = rows * words_per_row;
  for (int64_t i = begin + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = 0u;
}

}  // namespace

void ragged_offsets(cudaStream_t st, const int32_t* cu, int B, int64_t NH, int64_t NKV, int64_t HS, int32_t* seq_len,
                    int32_t* off_q, int32_t* off_kv, int32_t* off_stats) {
  ragged_offsets_kernel<<<grid_1d(B + 1), kThreads, 0, st>>>(cu, B, NH * HS, NKV * HS, NH, seq_len, off_q, off_kv,
                                                              off_stats);
  CUDA_CHECK_LAUNCH();
}

void zero_tail_rows(cudaStream_t st, void* x, const int32_t* cu, int B, int64_t rows, int64_t row_bytes) {
  VLM_ASSERT(row_bytes % 4 == 0, "zero_tail_rows: rows of ", row_bytes, " bytes");
  if (rows == 0) return;
  // A modest grid: the tail is usually empty (the step's micro-batches fill T exactly).
  zero_tail_kernel<<<64, kThreads, 0, st>>>(static_cast<uint32_t*>(x), cu, B, row_bytes / 4, rows);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

// CUDA embedding lookup for a (possibly vocab-parallel) table shard
// (core/ops/embedding.inc), f32 or bf16 table and output (the lookup copies elements),
// i32 ids; the backward's dout and dtable f32 or bf16, read and written natively
// (cuda_util.cuh Act: each row's sum in f32, stored once). table[V,C] holds vocabulary rows
// [vocab_offset, vocab_offset + V); ids outside the shard read as 0 and receive no
// gradient. Forward: one thread per output element (coalesced along C).
// Backward without atomics, in the CPU's order (core/cpu/embedding.cpp), so the result
// is the same bits as the CPU's and in every run:
//  1. key[t] = the shard row of ids[t] (V for an id outside the shard), value[t] = t;
//  2. a stable radix sort of the (key, value) pairs (CUB), so each row's tokens are
//     contiguous and in token order;
//  3. one block per sorted position that starts a row's run: each thread owns columns
//     and adds the run's gradient rows to dtable[row] one after the other, in f32, as
//     the CPU does (dtable[row] += dout[t] for t in order).
// The keys, values and CUB's temporary storage live in the stream's scratch.
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda {
namespace {

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* ids, const T* table, int64_t n, int64_t C, int64_t V,
                                         int64_t offset) {
  VLM_GRID_STRIDE(i, n) {
    const int64_t row = int64_t(ids[i / C]) - offset;
    out[i] = (row >= 0 && row < V) ? table[row * C + i % C] : T(0.f);
  }
}

__global__ void embedding_keys_kernel(int32_t* key, int32_t* pos, const int32_t* ids, int64_t T, int64_t V,
                                      int64_t offset) {
  VLM_GRID_STRIDE(t, T) {
    const int64_t row = int64_t(ids[t]) - offset;
    key[t] = (row >= 0 && row < V) ? int32_t(row) : int32_t(V);
    pos[t] = int32_t(t);
  }
}

// Block (i, y): if sorted position i starts a run of one row, columns y*blockDim.x + x
// of that row get the run's gradient rows added in order.
__global__ void embedding_runs_kernel(Act dtable, Act dout, const int32_t* key, const int32_t* pos, int64_t T,
                                      int64_t C, int64_t V) {
  const int64_t i = blockIdx.x;
  const int32_t row = key[i];
  if (row >= V || (i > 0 && key[i - 1] == row)) return;  // outside the shard, or not a run's start
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = dtable.ld(int64_t(row) * C + c);
  for (int64_t j = i; j < T && key[j] == row; ++j) acc += dout.ld(int64_t(pos[j]) * C + c);
  dtable.st(int64_t(row) * C + c, acc);
}

int end_bit(int64_t V) {  // bits holding keys 0..V
  int b = 1;
  while (b < 31 && (int64_t(1) << b) <= V) ++b;
  return b;
}

}  // namespace

void embedding_forward(Stream& s, const Tensor& out, const Tensor& ids, const Tensor& table, int64_t vocab_offset) {
  const int64_t V = table.size(0), C = table.size(1), T = ids.numel();
  const int64_t n = T * C;
  if (n == 0) return;
  if (table.dtype() == DType::BF16)
    embedding_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(bf16p(out), i32p(ids), bf16p(table), n, C, V,
                                                                         vocab_offset);
  else
    embedding_forward_kernel<<<grid_1d(n), kThreads, 0, stream_of(s)>>>(f32p(out), i32p(ids), f32p(table), n, C, V,
                                                                         vocab_offset);
  CUDA_CHECK_LAUNCH();
}

void embedding_backward(Stream& s, const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                        int64_t vocab_offset) {
  const int64_t V = dtable.size(0), C = dtable.size(1), T = ids.numel();
  if (T == 0 || C == 0) return;
  VLM_ASSERT(T < (int64_t(1) << 31) && V < (int64_t(1) << 31) - 1, "embedding_backward: T=", T, " V=", V,
             " beyond int32 keys");
  CudaStream& cs = cuda_stream(s);
  const int bits = end_bit(V);
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), int(T), 0, bits, cs.handle()));
  const size_t keys = (size_t(T) * sizeof(int32_t) + 255) / 256 * 256;
  char* base = static_cast<char*>(cs.scratch(4 * keys + sort_bytes));
  auto* key_in = reinterpret_cast<int32_t*>(base);
  auto* pos_in = reinterpret_cast<int32_t*>(base + keys);
  auto* key_out = reinterpret_cast<int32_t*>(base + 2 * keys);
  auto* pos_out = reinterpret_cast<int32_t*>(base + 3 * keys);
  embedding_keys_kernel<<<grid_1d(T), kThreads, 0, cs.handle()>>>(key_in, pos_in, i32p(ids), T, V, vocab_offset);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + 4 * keys, sort_bytes, key_in, key_out, pos_in, pos_out, int(T),
                                             0, bits, cs.handle()));
  const int threads = int(std::min<int64_t>(256, (C + 31) / 32 * 32));
  const dim3 grid(unsigned(T), unsigned((C + threads - 1) / threads));
  VLM_ASSERT(grid.y <= 65535, "embedding_backward: C=", C, " too wide");
  embedding_runs_kernel<<<grid, threads, 0, cs.handle()>>>(act(dtable), act(dout), key_out, pos_out, T, C, V);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vlm::cuda

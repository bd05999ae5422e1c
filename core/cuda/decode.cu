// CUDA ops of incremental decoding (core/ops/decode.inc): scatter_rows and
// attention_decode.
//  - scatter_rows: one thread per 4-byte word (or byte, when a row is not a whole number
//    of words) of src, any dtype; rows[i] < 0 skips row i.
//  - attention_decode (f32 or bf16 operands, read and written natively: cuda_util.cuh
//    Act; f32 arithmetic): one block of 4 warps per (head h, row n). Warp w walks the
//    keys j = w, w+4, ... of row n's cache range: lane d holds q and the output columns
//    d, d+32, ... (NPL = ceil(HS/32) registers, as in attention_forward.cu), the score
//    is a warp sum, and an online softmax (running max m, sum l) rescales the partial
//    output. The four warps' (m, l, o) are then merged in shared memory, in f32; the
//    output rounded once.
//    The key ranges are read on the device (never copied to the host), so their bounds
//    are the caller's invariant (the CPU op checks them).
// A simple, obviously-correct kernel, memory-bound like any decode attention: every
// cached key and value of the row is read once per head of its group.
#include "core/cuda/attention_common.cuh"

namespace vlm::cuda {
namespace {

using attn::kBlockThreads;
using attn::kWarps;

template <typename W>
__global__ void scatter_rows_kernel(W* dst, const W* src, const int32_t* rows, int64_t n, int64_t width) {
  VLM_GRID_STRIDE(i, n) {
    const int32_t r = rows[i / width];
    if (r >= 0) dst[int64_t(r) * width + i % width] = src[i];
  }
}

template <int NPL>
__global__ void __launch_bounds__(kBlockThreads)
    attention_decode_kernel(Act out, Act q, Act kc, Act vc, const int32_t* key_start, const int32_t* key_len, int NH,
                            int NKV, int HS, float scale) {
  extern __shared__ float wo[];  // [kWarps][HS]: each warp's unnormalised output
  __shared__ float wm[kWarps], wl[kWarps];
  const int h = blockIdx.x, n = blockIdx.y, g = h / (NH / NKV);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t start = key_start[n], kv_stride = int64_t(NKV) * HS;
  const int len = key_len[n];
  const int64_t qr = (int64_t(n) * NH + h) * HS;
  float qv[NPL], o[NPL];
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < HS ? q.ld(qr + d) * scale : 0.f;
    o[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int j = warp; j < len; j += kWarps) {  // uniform over the warp
    const int64_t kvr = (start + j) * kv_stride + int64_t(g) * HS;  // the key's and the value's row
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int d = lane + 32 * i;
      if (d < HS) dot += qv[i] * kc.ld(kvr + d);
    }
    dot = warp_sum(dot);
    const float mn = fmaxf(m, dot);
    const float corr = expf(m - mn);  // 0 while m is -inf
    const float p = expf(dot - mn);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int d = lane + 32 * i;
      if (d < HS) o[i] = o[i] * corr + p * vc.ld(kvr + d);
    }
    m = mn;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int i = 0; i < NPL; ++i) {
    const int d = lane + 32 * i;
    if (d < HS) wo[warp * HS + d] = o[i];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w]);
  float L = 0.f;
  for (int w = 0; w < kWarps; ++w)
    if (wm[w] > -INFINITY) L += wl[w] * expf(wm[w] - M);  // a warp without keys adds nothing
  for (int d = threadIdx.x; d < HS; d += kBlockThreads) {
    float acc = 0.f;
    for (int w = 0; w < kWarps; ++w)
      if (wm[w] > -INFINITY) acc += wo[w * HS + d] * expf(wm[w] - M);
    out.st((int64_t(n) * NH + h) * HS + d, acc / L);  // L >= 1: the row sees its own key
  }
}

template <int NPL>
void launch_decode(cudaStream_t st, dim3 grid, Act out, Act q, Act k, Act v, const int32_t* ks, const int32_t* kl,
                   int NH, int NKV, int HS, float scale) {
  const size_t smem = sizeof(float) * size_t(kWarps) * size_t(HS);
  attention_decode_kernel<NPL><<<grid, kBlockThreads, smem, st>>>(out, q, k, v, ks, kl, NH, NKV, HS, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void scatter_rows(Stream& s, const Tensor& dst, const Tensor& src, const Tensor& rows) {
  const int64_t R = dst.size(0), N = src.size(0);
  const int64_t width = R > 0 ? dst.numel() / R : 0;
  const int64_t row_bytes = width * int64_t(dtype_size(dst.dtype()));
  if (N == 0 || row_bytes == 0) return;
  cudaStream_t st = stream_of(s);
  if (row_bytes % 4 == 0) {
    const int64_t w = row_bytes / 4, n = N * w;
    scatter_rows_kernel<<<grid_1d(n), kThreads, 0, st>>>(static_cast<uint32_t*>(dst.data()),
                                                         static_cast<const uint32_t*>(src.data()), i32p(rows), n, w);
  } else {
    const int64_t n = N * row_bytes;
    scatter_rows_kernel<<<grid_1d(n), kThreads, 0, st>>>(static_cast<unsigned char*>(dst.data()),
                                                         static_cast<const unsigned char*>(src.data()), i32p(rows),
                                                         n, row_bytes);
  }
  CUDA_CHECK_LAUNCH();
}

void attention_decode(Stream& s, const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& key_start, const Tensor& key_len, int max_len) {
  const char* op = "attention_decode";
  const int64_t N = q.size(0), NH = q.size(1), HS = q.size(2), NKV = k_cache.size(1);
  VLM_ASSERT(HS <= attn::kMaxHeadSize, op, ": head size ", HS, " above ", attn::kMaxHeadSize);
  VLM_ASSERT(N <= 65535 && NH <= 65535, op, ": at most 65535 rows and heads per call, got ", N, " and ", NH);
  if (N == 0) return;
  cudaStream_t st = stream_of(s);
  const dim3 grid(static_cast<unsigned>(NH), static_cast<unsigned>(N));
  const float scale = float(1.0 / std::sqrt(double(HS)));
  const Act po = act(out), pq = act(q), pk = act(k_cache), pv = act(v_cache);
  const int32_t *ks = i32p(key_start), *kl = i32p(key_len);
  const int nh = int(NH), nkv = int(NKV), hs = int(HS);
  switch (attn::npl_for(hs)) {
    case 1: return launch_decode<1>(st, grid, po, pq, pk, pv, ks, kl, nh, nkv, hs, scale);
    case 2: return launch_decode<2>(st, grid, po, pq, pk, pv, ks, kl, nh, nkv, hs, scale);
    case 4: return launch_decode<4>(st, grid, po, pq, pk, pv, ks, kl, nh, nkv, hs, scale);
    default: return launch_decode<8>(st, grid, po, pq, pk, pv, ks, kl, nh, nkv, hs, scale);
  }
}

}  // namespace vlm::cuda

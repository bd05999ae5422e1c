// CUDA attention forward over packed variable-length samples (core/ops/attention.inc):
// out = softmax(scale * q k^T, masked) v and lse, by an online softmax (FlashAttention's
// recurrence) in f32; see attention_common.cuh for layout and thread mapping.
// Grid: (ceil(max_seqlen/16), NH, B); blocks past their sample's end exit at once.
// Tokens outside every sample (T > cu_seqlens[B]) get out = 0 and lse = 0.
//
// Future work: a cuDNN fused-SDPA path (cudnn frontend graph with ragged offsets) or a
// tensor-core kernel would be several times faster; it is not written yet because it
// needs a GPU to validate against this kernel, and none was available when it was
// written. This kernel is the simple, obviously-correct reference for it.
#include "core/cuda/attention_common.cuh"

namespace vlm::cuda {
namespace {

using namespace attn;

template <int NPL>
__global__ void __launch_bounds__(kBlockThreads)
    attention_forward_kernel(float* out, float* lse, const float* q, const float* k, const float* v, Params P) {
  extern __shared__ float smem[];
  const int b = blockIdx.z, h = blockIdx.y;
  const int start = P.cu_seqlens[b], len = P.cu_seqlens[b + 1] - start;
  const int q0 = blockIdx.x * kQTile;
  if (q0 >= len) return;  // uniform over the block, before any barrier
  const int HS = P.HS, ld = HS + 1;
  const int g = h / (P.NH / P.NKV);
  const int64_t q_stride = int64_t(P.NH) * HS, kv_stride = int64_t(P.NKV) * HS;
  float* Qs = smem;              // [kQTile][HS], pre-scaled
  float* Ks = Qs + kQTile * HS;  // [kKTile][ld]
  float* Vs = Ks + kKTile * ld;  // [kKTile][HS]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < kQTile * HS; idx += kBlockThreads) {
    const int r = idx / HS, d = idx % HS, qi = q0 + r;
    Qs[idx] = qi < len ? q[(start + qi) * q_stride + h * HS + d] * P.scale : 0.f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][NPL];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) o[rr][i] = 0.f;
  }

  const int kend = P.causal ? min(len, q0 + kQTile) : len;  // keys any row here may see
  for (int k0 = 0; k0 < kend; k0 += kKTile) {
    __syncthreads();  // the previous tile is consumed (and Qs is complete)
    for (int idx = tid; idx < kKTile * HS; idx += kBlockThreads) {
      const int j = idx / HS, d = idx % HS, kj = k0 + j;
      const bool ok = kj < len;
      const int64_t src = (start + kj) * kv_stride + g * HS + d;
      Ks[j * ld + d] = ok ? k[src] : 0.f;
      Vs[j * HS + d] = ok ? v[src] : 0.f;
    }
    __syncthreads();
    const int nk = min(kKTile, kend - k0);
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr, qi = q0 + r;
      if (qi >= len) continue;  // warp-uniform
      const int kj = k0 + lane;
      const bool ok = lane < nk && (!P.causal || kj <= qi);
      float sc = -INFINITY;
      if (ok) {
        const float* qr = Qs + r * HS;
        const float* kr = Ks + lane * ld;
        float acc = 0.f;
        for (int d = 0; d < HS; ++d) acc += qr[d] * kr[d];
        sc = acc;
      }
      const float mn = fmaxf(m[rr], warp_max(sc));
      if (mn == -INFINITY) continue;  // nothing visible yet in this row (warp-uniform)
      const float p = ok ? expf(sc - mn) : 0.f;
      const float corr = expf(m[rr] - mn);  // 0 when m was -inf
      l[rr] = l[rr] * corr + warp_sum(p);
      m[rr] = mn;
#pragma unroll
      for (int i = 0; i < NPL; ++i) o[rr][i] *= corr;
      for (int j = 0; j < nk; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        const float* vr = Vs + j * HS;
#pragma unroll
        for (int i = 0; i < NPL; ++i) {
          const int d = lane + 32 * i;
          if (d < HS) o[rr][i] += pj * vr[d];
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int qi = q0 + warp * kRowsPerWarp + rr;
    if (qi >= len) continue;
    const int64_t t = start + qi;
    const float inv = 1.f / l[rr];  // l >= 1: every row sees at least its own key
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int d = lane + 32 * i;
      if (d < HS) out[t * q_stride + h * HS + d] = o[rr][i] * inv;
    }
    if (lane == 0) lse[t * P.NH + h] = m[rr] + logf(l[rr]);
  }
}

template <int NPL>
void launch_forward(cudaStream_t st, dim3 grid, const Params& P, float* out, float* lse, const float* q,
                    const float* k, const float* v) {
  const size_t smem = sizeof(float) * (size_t(kQTile) * P.HS + size_t(kKTile) * (P.HS + 1) + size_t(kKTile) * P.HS);
  allow_smem(attention_forward_kernel<NPL>, smem);
  attention_forward_kernel<NPL><<<grid, kBlockThreads, smem, st>>>(out, lse, q, k, v, P);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  const char* op = "attention_forward";
  const int B = check_limits(op, q, cu_seqlens);
  cudaStream_t st = stream_of(s);
  // Rows outside every sample are never visited by the kernel: define them as 0.
  CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), st));
  CUDA_CHECK(cudaMemsetAsync(lse.data(), 0, lse.nbytes(), st));
  if (B == 0 || max_seqlen == 0 || q.numel() == 0) return;
  const Params P = make_params(q, k, cu_seqlens, causal);
  const dim3 grid(unsigned((max_seqlen + kQTile - 1) / kQTile), unsigned(P.NH), unsigned(B));
  float *po = f32p(out), *pl = f32p(lse);
  const float *pq = f32p(q), *pk = f32p(k), *pv = f32p(v);
  switch (npl_for(P.HS)) {
    case 1: return launch_forward<1>(st, grid, P, po, pl, pq, pk, pv);
    case 2: return launch_forward<2>(st, grid, P, po, pl, pq, pk, pv);
    case 4: return launch_forward<4>(st, grid, P, po, pl, pq, pk, pv);
    default: return launch_forward<8>(st, grid, P, po, pl, pq, pk, pv);
  }
}

}  // namespace vlm::cuda

// CUDA attention backward over packed variable-length samples (core/ops/attention.inc).
// Recomputes the probabilities from the saved lse, p_ij = exp(scale q_i.k_j - lse_i),
// and with D_i = sum_d dout_i[d] out_i[d]:
//   dv_j = sum_i p_ij dout_i,  ds_ij = p_ij (dout_i.v_j - D_i),
//   dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i  (summed over the heads
//   of the kv group for dk/dv).
// Two kernels, each owning its outputs (no atomics, deterministic; see
// attention_common.cuh): the dq kernel walks key tiles for 16 queries, the dk/dv kernel
// walks the query tiles of every head in its group for 16 keys. D is recomputed where
// needed (one dot product per row and tile) instead of stored in a workspace.
// dq, dk, dv are overwritten; tokens outside every sample get 0.
#include "core/cuda/attention_common.cuh"

namespace vlm::cuda {
namespace {

using namespace attn;

// D_i for row `row` of the shared dO tile (stride ld_do) and the out row in global memory.
__device__ __forceinline__ float row_delta(const float* dO_row, const float* out_row, int HS) {
  float d = 0.f;
  for (int c = threadIdx.x & 31; c < HS; c += 32) d += dO_row[c] * out_row[c];
  return warp_sum(d);
}

template <int NPL>
__global__ void __launch_bounds__(kBlockThreads)
    attention_dq_kernel(float* dq, const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, Params P) {
  extern __shared__ float smem[];
  const int b = blockIdx.z, h = blockIdx.y;
  const int start = P.cu_seqlens[b], len = P.cu_seqlens[b + 1] - start;
  const int q0 = blockIdx.x * kQTile;
  if (q0 >= len) return;  // uniform over the block, before any barrier
  const int HS = P.HS, ld = HS + 1;
  const int g = h / (P.NH / P.NKV);
  const int64_t q_stride = int64_t(P.NH) * HS, kv_stride = int64_t(P.NKV) * HS;
  float* Qs = smem;               // [kQTile][HS], pre-scaled
  float* dOs = Qs + kQTile * HS;  // [kQTile][HS]
  float* Ks = dOs + kQTile * HS;  // [kKTile][ld]
  float* Vs = Ks + kKTile * ld;   // [kKTile][ld]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < kQTile * HS; idx += kBlockThreads) {
    const int r = idx / HS, d = idx % HS, qi = q0 + r;
    const int64_t src = (start + qi) * q_stride + h * HS + d;
    Qs[idx] = qi < len ? q[src] * P.scale : 0.f;
    dOs[idx] = qi < len ? dout[src] : 0.f;
  }
  __syncthreads();

  float L[kRowsPerWarp], D[kRowsPerWarp], acc[kRowsPerWarp][NPL];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr, qi = q0 + r;
    const int64_t t = start + qi;
    L[rr] = qi < len ? lse[t * P.NH + h] : 0.f;
    D[rr] = qi < len ? row_delta(dOs + r * HS, out + t * q_stride + h * HS, HS) : 0.f;
#pragma unroll
    for (int i = 0; i < NPL; ++i) acc[rr][i] = 0.f;
  }

  const int kend = P.causal ? min(len, q0 + kQTile) : len;
  for (int k0 = 0; k0 < kend; k0 += kKTile) {
    __syncthreads();  // the previous tile is consumed
    for (int idx = tid; idx < kKTile * HS; idx += kBlockThreads) {
      const int j = idx / HS, d = idx % HS, kj = k0 + j;
      const bool ok = kj < len;
      const int64_t src = (start + kj) * kv_stride + g * HS + d;
      Ks[j * ld + d] = ok ? k[src] : 0.f;
      Vs[j * ld + d] = ok ? v[src] : 0.f;
    }
    __syncthreads();
    const int nk = min(kKTile, kend - k0);
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr, qi = q0 + r;
      if (qi >= len) continue;  // warp-uniform
      const int kj = k0 + lane;
      float ds = 0.f;
      if (lane < nk && (!P.causal || kj <= qi)) {
        const float* qr = Qs + r * HS;
        const float* dr = dOs + r * HS;
        const float* kr = Ks + lane * ld;
        const float* vr = Vs + lane * ld;
        float sc = 0.f, dp = 0.f;
        for (int d = 0; d < HS; ++d) {
          sc += qr[d] * kr[d];
          dp += dr[d] * vr[d];
        }
        ds = expf(sc - L[rr]) * (dp - D[rr]);
      }
      for (int j = 0; j < nk; ++j) {
        const float dsj = __shfl_sync(0xffffffffu, ds, j);
        const float* kr = Ks + j * ld;
#pragma unroll
        for (int i = 0; i < NPL; ++i) {
          const int d = lane + 32 * i;
          if (d < HS) acc[rr][i] += dsj * kr[d];
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int qi = q0 + warp * kRowsPerWarp + rr;
    if (qi >= len) continue;
    const int64_t t = start + qi;
#pragma unroll
    for (int i = 0; i < NPL; ++i) {
      const int d = lane + 32 * i;
      if (d < HS) dq[t * q_stride + h * HS + d] = acc[rr][i] * P.scale;
    }
  }
}

template <int NPL>
__global__ void __launch_bounds__(kBlockThreads)
    attention_dkdv_kernel(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                          const float* out, const float* lse, Params P) {
  extern __shared__ float smem[];
  const int b = blockIdx.z, g = blockIdx.y;
  const int start = P.cu_seqlens[b], len = P.cu_seqlens[b + 1] - start;
  const int k0 = blockIdx.x * kKvTile;
  if (k0 >= len) return;  // uniform over the block, before any barrier
  const int HS = P.HS, ld = HS + 1;
  const int rep = P.NH / P.NKV;
  const int64_t q_stride = int64_t(P.NH) * HS, kv_stride = int64_t(P.NKV) * HS;
  float* Ks = smem;                    // [kKvTile][HS]
  float* Vs = Ks + kKvTile * HS;       // [kKvTile][HS]
  float* Qs = Vs + kKvTile * HS;       // [kQTileBwd][ld], pre-scaled
  float* dOs = Qs + kQTileBwd * ld;    // [kQTileBwd][ld]
  float* Ls = dOs + kQTileBwd * ld;    // [kQTileBwd]
  float* Ds = Ls + kQTileBwd;          // [kQTileBwd]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < kKvTile * HS; idx += kBlockThreads) {
    const int j = idx / HS, d = idx % HS, kj = k0 + j;
    const int64_t src = (start + kj) * kv_stride + g * HS + d;
    Ks[idx] = kj < len ? k[src] : 0.f;
    Vs[idx] = kj < len ? v[src] : 0.f;
  }

  float dk_acc[kRowsPerWarp][NPL], dv_acc[kRowsPerWarp][NPL];
#pragma unroll
  for (int kk = 0; kk < kRowsPerWarp; ++kk)
#pragma unroll
    for (int i = 0; i < NPL; ++i) dk_acc[kk][i] = dv_acc[kk][i] = 0.f;

  // Causal: queries before k0 see none of this block's keys.
  const int qbegin = P.causal ? k0 : 0;
  for (int hh = 0; hh < rep; ++hh) {
    const int h = g * rep + hh;
    for (int qs = qbegin; qs < len; qs += kQTileBwd) {
      __syncthreads();  // the previous query tile is consumed (and K/V are loaded)
      for (int idx = tid; idx < kQTileBwd * HS; idx += kBlockThreads) {
        const int i = idx / HS, d = idx % HS, qi = qs + i;
        const int64_t src = (start + qi) * q_stride + h * HS + d;
        Qs[i * ld + d] = qi < len ? q[src] * P.scale : 0.f;
        dOs[i * ld + d] = qi < len ? dout[src] : 0.f;
      }
      __syncthreads();
      for (int i = warp; i < kQTileBwd; i += kWarps) {
        const int qi = qs + i;
        const int64_t t = start + qi;
        const float dlt = qi < len ? row_delta(dOs + i * ld, out + t * q_stride + h * HS, HS) : 0.f;
        if (lane == 0) {
          Ds[i] = dlt;
          Ls[i] = qi < len ? lse[t * P.NH + h] : 0.f;
        }
      }
      __syncthreads();
      const int nq = min(kQTileBwd, len - qs);
#pragma unroll
      for (int kk = 0; kk < kRowsPerWarp; ++kk) {
        const int kl = warp * kRowsPerWarp + kk, kj = k0 + kl;
        if (kj >= len) continue;  // warp-uniform
        const int qi = qs + lane;
        float p = 0.f, ds = 0.f;
        if (lane < nq && (!P.causal || qi >= kj)) {
          const float* qr = Qs + lane * ld;
          const float* dr = dOs + lane * ld;
          const float* kr = Ks + kl * HS;
          const float* vr = Vs + kl * HS;
          float sc = 0.f, dp = 0.f;
          for (int d = 0; d < HS; ++d) {
            sc += qr[d] * kr[d];
            dp += dr[d] * vr[d];
          }
          p = expf(sc - Ls[lane]);
          ds = p * (dp - Ds[lane]);
        }
        for (int i = 0; i < nq; ++i) {
          const float pi = __shfl_sync(0xffffffffu, p, i);
          const float dsi = __shfl_sync(0xffffffffu, ds, i);
          const float* qr = Qs + i * ld;
          const float* dr = dOs + i * ld;
#pragma unroll
          for (int c = 0; c < NPL; ++c) {
            const int d = lane + 32 * c;
            if (d < HS) {
              dv_acc[kk][c] += pi * dr[d];
              dk_acc[kk][c] += dsi * qr[d];  // Qs is pre-scaled: this is scale * ds q
            }
          }
        }
      }
    }
  }

#pragma unroll
  for (int kk = 0; kk < kRowsPerWarp; ++kk) {
    const int kj = k0 + warp * kRowsPerWarp + kk;
    if (kj >= len) continue;
    const int64_t dst = (start + kj) * kv_stride + g * HS;
#pragma unroll
    for (int c = 0; c < NPL; ++c) {
      const int d = lane + 32 * c;
      if (d < HS) {
        dk[dst + d] = dk_acc[kk][c];
        dv[dst + d] = dv_acc[kk][c];
      }
    }
  }
}

struct Ptrs {
  float *dq, *dk, *dv;
  const float *dout, *q, *k, *v, *out, *lse;
};

template <int NPL>
void launch_backward(cudaStream_t st, int B, int max_seqlen, const Params& P, const Ptrs& a) {
  const size_t HS = size_t(P.HS), ld = HS + 1;
  const size_t smem_dq = sizeof(float) * (2 * kQTile * HS + 2 * kKTile * ld);
  allow_smem(attention_dq_kernel<NPL>, smem_dq);
  const dim3 grid_dq(unsigned((max_seqlen + kQTile - 1) / kQTile), unsigned(P.NH), unsigned(B));
  attention_dq_kernel<NPL><<<grid_dq, kBlockThreads, smem_dq, st>>>(a.dq, a.dout, a.q, a.k, a.v, a.out, a.lse, P);
  CUDA_CHECK_LAUNCH();

  const size_t smem_kv = sizeof(float) * (2 * kKvTile * HS + 2 * kQTileBwd * ld + 2 * kQTileBwd);
  allow_smem(attention_dkdv_kernel<NPL>, smem_kv);
  const dim3 grid_kv(unsigned((max_seqlen + kKvTile - 1) / kKvTile), unsigned(P.NKV), unsigned(B));
  attention_dkdv_kernel<NPL><<<grid_kv, kBlockThreads, smem_kv, st>>>(a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out,
                                                                      a.lse, P);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  const char* op = "attention_backward";
  const int B = check_limits(op, q, cu_seqlens);
  cudaStream_t st = stream_of(s);
  // Rows outside every sample are never visited by the kernels: their gradient is 0.
  CUDA_CHECK(cudaMemsetAsync(dq.data(), 0, dq.nbytes(), st));
  CUDA_CHECK(cudaMemsetAsync(dk.data(), 0, dk.nbytes(), st));
  CUDA_CHECK(cudaMemsetAsync(dv.data(), 0, dv.nbytes(), st));
  if (B == 0 || max_seqlen == 0 || q.numel() == 0) return;
  const Params P = make_params(q, k, cu_seqlens, causal);
  const Ptrs a{f32p(dq), f32p(dk), f32p(dv), f32p(dout), f32p(q), f32p(k), f32p(v), f32p(out), f32p(lse)};
  switch (npl_for(P.HS)) {
    case 1: return launch_backward<1>(st, B, max_seqlen, P, a);
    case 2: return launch_backward<2>(st, B, max_seqlen, P, a);
    case 4: return launch_backward<4>(st, B, max_seqlen, P, a);
    default: return launch_backward<8>(st, B, max_seqlen, P, a);
  }
}

}  // namespace vlm::cuda

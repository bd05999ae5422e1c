// Shared pieces of the CUDA attention kernels (attention_forward.cu, attention_backward.cu):
// tile sizes, the launch parameters, the kernels' limits and the head-size dispatch.
//
// Layout: q[T,NH,HS], k/v[T,NKV,HS], out[T,NH,HS], lse[T,NH], all f32; cu_seqlens[B+1]
// (i32, device) cuts T into samples; head h reads kv head h / (NH/NKV).
// Scores are s = scale * q.k with scale = 1/sqrt(HS); lse = log sum_j exp(s_ij) over the
// keys row i may see (causal: j <= i within its sample; else the whole sample).
//
// Mapping (all kernels: 4 warps, f32 in shared memory, f32 accumulation):
//  - forward and dq: a block owns 16 queries of one (sample, head), 4 rows per warp, and
//    walks key tiles of 32 keys held in shared memory; lane j of a warp scores key j,
//    and lane d accumulates output columns d, d+32, ... (NPL = ceil(HS/32) registers).
//  - dk/dv: a block owns 16 keys of one (sample, kv head), 4 keys per warp, and walks
//    query tiles of 32 rows of every head of its group; lane i scores query i. Each
//    key's dk/dv is owned by one warp: no atomics, deterministic.
// Rows of K/V (forward, dq) and of Q/dO (dk/dv) that lanes read at a fixed column are
// padded to HS+1 floats, so the 32 lanes hit 32 different banks.
#pragma once
#include <cmath>

#include "core/cuda/cuda_util.cuh"

namespace vlm::cuda::attn {

inline constexpr int kWarps = 4;
inline constexpr int kBlockThreads = kWarps * 32;
inline constexpr int kRowsPerWarp = 4;
inline constexpr int kQTile = kWarps * kRowsPerWarp;  // queries per block (forward, dq)
inline constexpr int kKTile = 32;                     // keys per shared tile (lane = key)
inline constexpr int kKvTile = kWarps * kRowsPerWarp;  // keys per block (dk/dv)
inline constexpr int kQTileBwd = 32;                  // queries per shared tile (lane = query)
inline constexpr int kMaxHeadSize = 256;              // NPL <= 8

struct Params {
  const int32_t* cu_seqlens;
  int NH, NKV, HS;
  float scale;
  bool causal;
};

// The limits of these kernels, common to forward and backward (the op's contract is
// checked before: core/ops/contract_attention.cpp); returns the number of samples B.
inline int check_limits(const char* op, const Tensor& q, const Tensor& cu_seqlens) {
  VLM_ASSERT(q.size(2) <= kMaxHeadSize, op, ": head size ", q.size(2), " above ", kMaxHeadSize,
             " (the CUDA kernels keep ceil(HS/32) columns per lane)");
  const int64_t B = cu_seqlens.numel() - 1;
  VLM_ASSERT(B <= 65535, op, ": at most 65535 samples per call, got ", B);
  VLM_ASSERT(q.size(0) < (int64_t(1) << 31), op, ": T must fit in int32");
  return int(B);
}

inline Params make_params(const Tensor& q, const Tensor& k, const Tensor& cu_seqlens, bool causal) {
  return Params{cu_seqlens.ptr<int32_t>(), int(q.size(1)), int(k.size(1)), int(q.size(2)),
                float(1.0 / std::sqrt(double(q.size(2)))), causal};
}

// Values per lane for a head size: 1, 2, 4 or 8 (the kernels are instantiated for these).
inline int npl_for(int HS) {
  const int need = (HS + 31) / 32;
  return need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : 8;
}

// Allows `bytes` of dynamic shared memory for `kernel` (above 48 KB needs opting in).
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace vlm::cuda::attn

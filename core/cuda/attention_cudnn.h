// The routes of CUDA attention (core/ops/attention.inc) besides our f32 kernels
// (attention_forward.cu, attention_backward.cu), internal to core/cuda/:
//  - cuDNN's fused attention (attention_cudnn.cpp; its graphs: attention_cudnn_graph.h):
//    bf16 q/k/v over the packed samples as ragged tensors, causal or bidirectional, GQA,
//    head sizes up to 256 (multiples of 8); one graph per shape class (samples, longest
//    sample rounded up to a power of two >= 64, tokens rounded the same way for the
//    backward's workspace, heads, head size, mask) and stream, built at its first call
//    and cached (core/plan_cache.h); the composite engine, and for the backward cuDNN's
//    deterministic algorithm. A shape cuDNN does not take, a build without the frontend
//    (VLM_HAS_CUDNN_FRONTEND unset) or VLM_CUDNN_ATTENTION=0 in the environment return
//    false, and the verdict is cached too, so cuDNN is asked once per shape class;
//    attention_paths says which path each class took, and why (and when a workspace is
//    beyond the scratch the model planned, so the stream's grows at its first call).
//  - bf16 through our kernels (attention_bf16.cu): f32 copies in the stream's scratch,
//    our kernels, the results rounded to bf16 once.
//  - the aux kernels of the cuDNN route (attention_ragged.cu): the sequence lengths and
//    ragged offsets from cu_seqlens, and zeroing the rows past the last sample.
// docs/gpu.md, "Attention".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/cuda_backend.h"
#include "core/tensor.h"

namespace vlm::cuda {

bool cudnn_attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal);
bool cudnn_attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& cu_seqlens, int max_seqlen, bool causal);
// One line per attention shape class run on s so far: the shape and the path it took.
std::vector<std::string> attention_paths(CudaStream& s);
// Whether the cuDNN frontend was compiled in, and its version ("1.16.0").
std::string cudnn_frontend_version();

void attention_forward_bf16(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal);
void attention_backward_bf16(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& cu_seqlens, int max_seqlen, bool causal);

// From cu_seqlens[B+1]: seq_len[b] = cu[b+1] - cu[b], off_q[b] = cu[b] * NH * HS,
// off_kv[b] = cu[b] * NKV * HS, off_stats[b] = cu[b] * NH (b <= B).
void ragged_offsets(cudaStream_t st, const int32_t* cu, int B, int64_t NH, int64_t NKV, int64_t HS, int32_t* seq_len,
                    int32_t* off_q, int32_t* off_kv, int32_t* off_stats);
// Zeroes rows [cu[B], rows) of x (row_bytes each): the tokens outside every sample.
void zero_tail_rows(cudaStream_t st, void* x, const int32_t* cu, int B, int64_t rows, int64_t row_bytes);

}  // namespace vlm::cuda

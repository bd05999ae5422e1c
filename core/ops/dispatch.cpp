// Dispatch of every public op (core/ops.h) to its CPU or CUDA implementation, by
// the device of the stream. Generated shape, kept by hand: one line per op.
// The only place where an op learns whether CUDA was compiled in.
#include "core/ops.h"

namespace vlm {

#ifdef VLM_HAS_CUDA
#define VLM_DISPATCH(fn, ...)                                                   \
  do {                                                                          \
    if (s.device() == DeviceKind::CUDA) return cuda::fn(__VA_ARGS__);           \
    return cpu::fn(__VA_ARGS__);                                                \
  } while (0)
#else
#define VLM_DISPATCH(fn, ...)                                                   \
  do {                                                                          \
    VLM_ASSERT(s.device() == DeviceKind::CPU, #fn ": CUDA stream without CUDA backend"); \
    return cpu::fn(__VA_ARGS__);                                                \
  } while (0)
#endif


// gemm
void matmul(Stream& s, const Tensor& C, const Tensor& A, const Tensor& B, const GemmOpts& o) { VLM_DISPATCH(matmul, s, C, A, B, o); }
void bias_backward(Stream& s, const Tensor& dbias, const Tensor& dout) { VLM_DISPATCH(bias_backward, s, dbias, dout); }

// elementwise
void fill(Stream& s, const Tensor& x, float value) { VLM_DISPATCH(fill, s, x, value); }
void scale(Stream& s, const Tensor& x, float alpha) { VLM_DISPATCH(scale, s, x, alpha); }
void add(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) { VLM_DISPATCH(add, s, out, a, b); }
void accumulate(Stream& s, const Tensor& y, const Tensor& x, float alpha) { VLM_DISPATCH(accumulate, s, y, x, alpha); }
void mul(Stream& s, const Tensor& out, const Tensor& a, const Tensor& b) { VLM_DISPATCH(mul, s, out, a, b); }
void copy(Stream& s, const Tensor& dst, const Tensor& src) { VLM_DISPATCH(copy, s, dst, src); }
void copy_from_host(Stream& s, const Tensor& dst, const Tensor& src) { VLM_DISPATCH(copy_from_host, s, dst, src); }
void copy_to_host(Stream& s, const Tensor& dst, const Tensor& src) { VLM_DISPATCH(copy_to_host, s, dst, src); }
void convert(Stream& s, const Tensor& dst, const Tensor& src) { VLM_DISPATCH(convert, s, dst, src); }
void round_bf16(Stream& s, const Tensor& x) { VLM_DISPATCH(round_bf16, s, x); }
void bias_add(Stream& s, const Tensor& out, const Tensor& in, const Tensor& bias) { VLM_DISPATCH(bias_add, s, out, in, bias); }
void slice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) { VLM_DISPATCH(slice_cols, s, dst, src, offset); }
void unslice_cols(Stream& s, const Tensor& dst, const Tensor& src, int64_t offset) { VLM_DISPATCH(unslice_cols, s, dst, src, offset); }
void gelu_forward(Stream& s, const Tensor& out, const Tensor& in) { VLM_DISPATCH(gelu_forward, s, out, in); }
void gelu_backward(Stream& s, const Tensor& din, const Tensor& in, const Tensor& dout) { VLM_DISPATCH(gelu_backward, s, din, in, dout); }
void swiglu_forward(Stream& s, const Tensor& out, const Tensor& gate, const Tensor& up) { VLM_DISPATCH(swiglu_forward, s, out, gate, up); }
void swiglu_backward(Stream& s, const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate, const Tensor& up) { VLM_DISPATCH(swiglu_backward, s, dgate, dup, dout, gate, up); }
void sum_squares(Stream& s, const Tensor& out, const Tensor& x) { VLM_DISPATCH(sum_squares, s, out, x); }

// norm
void layernorm_forward(Stream& s, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in, const Tensor& w, const Tensor& b, float eps) { VLM_DISPATCH(layernorm_forward, s, out, mean, rstd, in, w, b, eps); }
void layernorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& in, const Tensor& w, const Tensor& mean, const Tensor& rstd) { VLM_DISPATCH(layernorm_backward, s, din, dw, db, dout, in, w, mean, rstd); }
void rmsnorm_forward(Stream& s, const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& w, float eps) { VLM_DISPATCH(rmsnorm_forward, s, out, rstd, in, w, eps); }
void rmsnorm_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dout, const Tensor& in, const Tensor& w, const Tensor& rstd) { VLM_DISPATCH(rmsnorm_backward, s, din, dw, dout, in, w, rstd); }

// softmax
void softmax_forward(Stream& s, const Tensor& out, const Tensor& in) { VLM_DISPATCH(softmax_forward, s, out, in); }
void softmax_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& out) { VLM_DISPATCH(softmax_backward, s, din, dout, out); }

// rope
void rope_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& pos, float theta) { VLM_DISPATCH(rope_forward, s, out, in, pos, theta); }
void rope_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& pos, float theta) { VLM_DISPATCH(rope_backward, s, din, dout, pos, theta); }

// attention
void attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal) { VLM_DISPATCH(attention_forward, s, out, lse, q, k, v, cu_seqlens, max_seqlen, causal); }
void attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& cu_seqlens, int max_seqlen, bool causal) { VLM_DISPATCH(attention_backward, s, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, max_seqlen, causal); }

// decode
void scatter_rows(Stream& s, const Tensor& dst, const Tensor& src, const Tensor& rows) { VLM_DISPATCH(scatter_rows, s, dst, src, rows); }
void attention_decode(Stream& s, const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& key_start, const Tensor& key_len, int max_len) { VLM_DISPATCH(attention_decode, s, out, q, k_cache, v_cache, key_start, key_len, max_len); }

// embedding
void embedding_forward(Stream& s, const Tensor& out, const Tensor& ids, const Tensor& table, int64_t vocab_offset) { VLM_DISPATCH(embedding_forward, s, out, ids, table, vocab_offset); }
void embedding_backward(Stream& s, const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t vocab_offset) { VLM_DISPATCH(embedding_backward, s, dtable, dout, ids, vocab_offset); }

// loss
void cross_entropy_forward(Stream& s, const Tensor& losses, const Tensor& logits, const Tensor& targets, int ignore_index) { VLM_DISPATCH(cross_entropy_forward, s, losses, logits, targets, ignore_index); }
void cross_entropy_backward(Stream& s, const Tensor& dlogits, const Tensor& logits, const Tensor& targets, const Tensor& dlosses, int ignore_index) { VLM_DISPATCH(cross_entropy_backward, s, dlogits, logits, targets, dlosses, ignore_index); }
void vocab_ce_rowmax(Stream& s, const Tensor& rowmax, const Tensor& logits) { VLM_DISPATCH(vocab_ce_rowmax, s, rowmax, logits); }
void vocab_ce_sumexp(Stream& s, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& rowmax, const Tensor& targets, int64_t vocab_offset) { VLM_DISPATCH(vocab_ce_sumexp, s, sumexp, target_logit, logits, rowmax, targets, vocab_offset); }
void vocab_ce_loss(Stream& s, const Tensor& losses, const Tensor& rowmax, const Tensor& sumexp, const Tensor& target_logit, const Tensor& targets, int ignore_index) { VLM_DISPATCH(vocab_ce_loss, s, losses, rowmax, sumexp, target_logit, targets, ignore_index); }
void vocab_ce_backward(Stream& s, const Tensor& dlogits, const Tensor& logits, const Tensor& rowmax, const Tensor& sumexp, const Tensor& targets, const Tensor& dlosses, int64_t vocab_offset, int ignore_index) { VLM_DISPATCH(vocab_ce_backward, s, dlogits, logits, rowmax, sumexp, targets, dlosses, vocab_offset, ignore_index); }

// conv
void conv2d_forward(Stream& s, const Tensor& out, const Tensor& in, const Tensor& w, const Tensor& bias, int stride, int pad) { VLM_DISPATCH(conv2d_forward, s, out, in, w, bias, stride, pad); }
void conv2d_backward(Stream& s, const Tensor& din, const Tensor& dw, const Tensor& dbias, const Tensor& dout, const Tensor& in, const Tensor& w, int stride, int pad) { VLM_DISPATCH(conv2d_backward, s, din, dw, dbias, dout, in, w, stride, pad); }
void avgpool2d_forward(Stream& s, const Tensor& out, const Tensor& in, int k, int stride) { VLM_DISPATCH(avgpool2d_forward, s, out, in, k, stride); }
void avgpool2d_backward(Stream& s, const Tensor& din, const Tensor& dout, int k, int stride) { VLM_DISPATCH(avgpool2d_backward, s, din, dout, k, stride); }
void maps_to_rows(Stream& s, const Tensor& rows, const Tensor& maps) { VLM_DISPATCH(maps_to_rows, s, rows, maps); }
void rows_to_maps(Stream& s, const Tensor& maps, const Tensor& rows) { VLM_DISPATCH(rows_to_maps, s, maps, rows); }

// image
void image_to_patches(Stream& s, const Tensor& out, const Tensor& in, int patch, const PixelNorm& n) { VLM_DISPATCH(image_to_patches, s, out, in, patch, n); }

// optim
void adamw_step(Stream& s, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const Tensor& param_copy, const AdamWOpts& o) { VLM_DISPATCH(adamw_step, s, param, grad, m, v, param_copy, o); }

// relevance
void sigmoid_forward(Stream& s, const Tensor& out, const Tensor& in) { VLM_DISPATCH(sigmoid_forward, s, out, in); }
void sigmoid_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& out) { VLM_DISPATCH(sigmoid_backward, s, din, dout, out); }
void row_stats_forward(Stream& s, const Tensor& out, const Tensor& in, float eps) { VLM_DISPATCH(row_stats_forward, s, out, in, eps); }
void row_stats_backward(Stream& s, const Tensor& din, const Tensor& dout, const Tensor& in, const Tensor& out) { VLM_DISPATCH(row_stats_backward, s, din, dout, in, out); }

}  // namespace vlm

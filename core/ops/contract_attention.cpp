// Contracts of core/ops/attention.inc (see contract.h). The values of cu_seqlens are
// the caller's invariant; the CPU op checks them as it reads them.
#include "core/ops/contract.h"

namespace vlm::contract {
namespace {

// q[T,NH,HS], k/v[T,NKV,HS] of q's dtype (NH % NKV == 0, HS >= 1), cu_seqlens[B+1] i32,
// 0 <= max_seqlen <= T.
void qkv_rules(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
               int max_seqlen) {
  op.dtype(q, "q");
  op.on_device(k, "k");
  VLM_ASSERT(q.ndim() == 3 && k.ndim() == 3, op.name, ": expected q[T,NH,HS], k[T,NKV,HS], got ", q.str(), " ",
             k.str());
  VLM_ASSERT(k.dtype() == q.dtype() && k.size(0) == q.size(0) && k.size(2) == q.size(2) && q.size(2) >= 1, op.name,
             ": k ", k.str(), " does not match q ", q.str());
  VLM_ASSERT(k.size(1) > 0 && q.size(1) % k.size(1) == 0, op.name, ": NH=", q.size(1), " not a multiple of NKV=",
             k.size(1));
  op.same(v, k, "v");
  op.on_device(cu_seqlens, "cu_seqlens");
  VLM_ASSERT(cu_seqlens.dtype() == DType::I32 && cu_seqlens.ndim() == 1 && cu_seqlens.numel() >= 1, op.name,
             ": cu_seqlens must be i32 [B+1], got ", cu_seqlens.str());
  VLM_ASSERT(max_seqlen >= 0 && max_seqlen <= q.size(0), op.name, ": max_seqlen ", max_seqlen, " for T=",
             q.size(0));
}

}  // namespace

void attention_forward(const Op& op, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool) {
  qkv_rules(op, q, k, v, cu_seqlens, max_seqlen);
  op.same(out, q, "out");
  op.stat(lse, q.size(0) * q.size(1), "lse");
}

void attention_backward(const Op& op, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& cu_seqlens, int max_seqlen, bool) {
  qkv_rules(op, q, k, v, cu_seqlens, max_seqlen);
  op.same(out, q, "out");
  op.same(dout, q, "dout");
  op.same(dq, q, "dq");
  op.same(dk, k, "dk");
  op.same(dv, k, "dv");
  op.stat(lse, q.size(0) * q.size(1), "lse");
}

}  // namespace vlm::contract

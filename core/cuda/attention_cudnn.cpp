// The cuDNN route of attention (attention_cudnn.h; docs/gpu.md, "Attention"): which
// calls cuDNN's fused attention takes, its plans cached per stream and shape class, and
// the lengths and offsets each call computes from cu_seqlens. The graphs themselves are
// attention_cudnn_graph.cpp's. Scratch: the 4 int32 arrays, then cuDNN's workspace, in
// the stream's scratch (planned by the model: attention_scratch_bytes).
#include "core/cuda/attention_cudnn.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "core/cuda/attention_cudnn_graph.h"
#include "core/plan_cache.h"

namespace vlm::cuda {
namespace {

struct AttentionPlans final : StreamState {
  PlanCache<SdpaKey, SdpaPlan, SdpaKeyHash> cache;
};

AttentionPlans& plans_of(CudaStream& cs) {
  std::unique_ptr<StreamState>& st = cs.state(StreamSlot::Attention);
  if (!st) st = std::make_unique<AttentionPlans>();
  return static_cast<AttentionPlans&>(*st);
}

int64_t round_up_pow2(int64_t x, int64_t at_least) {
  int64_t p = at_least;
  while (p < x) p *= 2;
  return p;
}

SdpaKey key_of(const Tensor& q, const Tensor& k, const Tensor& cu_seqlens, int max_seqlen, bool causal,
               bool backward) {
  SdpaKey key;
  key.b = cu_seqlens.numel() - 1;
  key.s = round_up_pow2(max_seqlen, 64);
  key.t_cap = backward ? round_up_pow2(q.size(0), 64) : 0;
  key.nh = q.size(1), key.nkv = k.size(1), key.hs = q.size(2);
  key.dtype = q.dtype();
  key.causal = causal, key.backward = backward;
  return key;
}

// Why cuDNN's fused attention cannot take this shape class whatever the graph (empty if
// it may): the verdict cached with the class.
std::string precheck(const SdpaKey& k) {
  // The GPU proof's sanitizer steps check our kernels, not cuDNN's (bench/gpu/proof_steps.sh).
  if (const char* e = std::getenv("VLM_CUDNN_ATTENTION"); e != nullptr && std::strcmp(e, "0") == 0)
    return "turned off by VLM_CUDNN_ATTENTION=0";
  if (k.dtype != DType::BF16) return cat(dtype_name(k.dtype), " (cuDNN's fused attention takes bf16)");
  if (k.hs % 8 != 0 || k.hs > 256) return cat("head size ", k.hs, " (cuDNN takes multiples of 8 up to 256)");
  if (k.b < 1) return "no sample";
  return "";
}

// Whether this call's tensors suit the graph: below 2^31 elements (int32 offsets) and
// 16-byte aligned. Checked at every call (the key has neither the token count of a
// forward nor the pointers), never cached: such a call alone runs our kernel.
bool call_fits(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->numel() >= (int64_t(1) << 31) || (reinterpret_cast<uintptr_t>(t->data()) & 15) != 0) return false;
  return true;
}

// The plan of this call (built at the first call of its shape class), or nullptr with
// the reason recorded in the cache (and our kernel runs).
SdpaPlan* plan_for(CudaStream& cs, const SdpaKey& k, std::initializer_list<const Tensor*> ts) {
  if (!call_fits(ts)) return nullptr;
  SdpaPlan& p = plans_of(cs).cache.get(k, [&]() -> std::unique_ptr<SdpaPlan> {
    std::string why = precheck(k);
    if (why.empty()) return build_sdpa_plan(cs, k);
    auto plan = std::make_unique<SdpaPlan>();
    plan->why = std::move(why);
    return plan;
  });
  return p.ok ? &p : nullptr;
}

// The lengths and offsets of this call, then the graph's workspace, in the scratch.
SdpaArgs aux_for(CudaStream& cs, const SdpaKey& k, const SdpaPlan& p, const Tensor& cu_seqlens) {
  const size_t arr = aux_array_bytes(k);
  char* base = static_cast<char*>(cs.scratch(4 * arr + size_t(p.workspace)));
  SdpaArgs a;
  a.seq = reinterpret_cast<int32_t*>(base), a.off_q = reinterpret_cast<int32_t*>(base + arr);
  a.off_kv = reinterpret_cast<int32_t*>(base + 2 * arr), a.off_stats = reinterpret_cast<int32_t*>(base + 3 * arr);
  a.workspace = base + 4 * arr;
  ragged_offsets(cs.handle(), cu_seqlens.ptr<int32_t>(), int(k.b), k.nh, k.nkv, k.hs, a.seq, a.off_q, a.off_kv,
                 a.off_stats);
  return a;
}

}  // namespace

bool cudnn_attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  CudaStream& cs = cuda_stream(s);
  const SdpaKey key = key_of(q, k, cu_seqlens, max_seqlen, causal, false);
  SdpaPlan* p = plan_for(cs, key, {&q, &k, &v, &out, &lse});
  if (!p) return false;
  const int B = int(key.b);
  if (max_seqlen > 0) {
    SdpaArgs a = aux_for(cs, key, *p, cu_seqlens);
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = out.data(), a.stats = lse.data();
    run_sdpa_plan(cs, key, *p, a);
  }
  zero_tail_rows(cs.handle(), out.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * key.hs * 2);
  zero_tail_rows(cs.handle(), lse.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * 4);
  return true;
}

bool cudnn_attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  CudaStream& cs = cuda_stream(s);
  const SdpaKey key = key_of(q, k, cu_seqlens, max_seqlen, causal, true);
  SdpaPlan* p = plan_for(cs, key, {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv});
  if (!p) return false;
  const int B = int(key.b);
  if (max_seqlen > 0) {
    SdpaArgs a = aux_for(cs, key, *p, cu_seqlens);
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = out.data(), a.stats = lse.data();
    a.d_o = dout.data(), a.dq = dq.data(), a.dk = dk.data(), a.dv = dv.data();
    run_sdpa_plan(cs, key, *p, a);
  }
  zero_tail_rows(cs.handle(), dq.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * key.hs * 2);
  zero_tail_rows(cs.handle(), dk.data(), cu_seqlens.ptr<int32_t>(), B, k.size(0), key.nkv * key.hs * 2);
  zero_tail_rows(cs.handle(), dv.data(), cu_seqlens.ptr<int32_t>(), B, k.size(0), key.nkv * key.hs * 2);
  return true;
}

std::vector<std::string> attention_paths(CudaStream& s) {
  std::vector<std::string> lines;
  plans_of(s).cache.for_each([&](const SdpaKey& k, const SdpaPlan& p) {
    lines.push_back(k.str() + ": " +
                    (p.ok ? cat("cuDNN fused attention (workspace ", p.workspace, " B", p.note, ")")
                          : "our kernel: " + p.why));
  });
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace vlm::cuda

// cuDNN's fused attention (scaled dot-product attention through the cuDNN graph API and
// its header-only frontend, pinned by ./run setup) for bf16 q/k/v: see
// attention_cudnn.h for the route and docs/gpu.md, "Attention" for what runs where.
// Layout: our packed tensors are cuDNN ragged tensors. q[T,NH,HS] is Q of dims
// [B, NH, S, HS] with strides [-, HS, NH*HS, 1] whose sample b starts at element
// off_q[b] = cu[b]*NH*HS; k/v likewise with NKV; lse[T,NH] is the f32 softmax-stats
// tensor [B, NH, S, 1] with strides [-, 1, NH, 1] at off_stats[b] = cu[b]*NH; the
// sequence lengths give the padding mask, so S (the graph's longest sample) is an upper
// bound. cuDNN's stats are the natural-log log-sum-exp of the scaled scores, as our lse,
// so either backward can follow either forward.
// Scratch: the lengths and offsets (4 int32 arrays of B+1), then cuDNN's workspace, in
// the stream's scratch (planned by the model: attention_scratch_bytes).
#include "core/cuda/attention_cudnn.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

#include "base/error.h"
#include "core/plan_cache.h"

#ifdef VLM_HAS_CUDNN_FRONTEND
#include <cudnn_frontend.h>
#endif

namespace vlm::cuda {
namespace {

// One shape class of attention calls (the graph's dimensions).
struct SdpaKey {
  int64_t b = 0, s = 0, t_cap = 0;  // samples, longest sample and tokens rounded up
  int64_t nh = 0, nkv = 0, hs = 0;
  DType dtype = DType::BF16;
  bool causal = false, backward = false;
  bool operator==(const SdpaKey& o) const {
    return b == o.b && s == o.s && t_cap == o.t_cap && nh == o.nh && nkv == o.nkv && hs == o.hs &&
           dtype == o.dtype && causal == o.causal && backward == o.backward;
  }
  std::string str() const {
    return cat(backward ? "backward" : "forward", " ", dtype_name(dtype), " B", b, " S<=", s, " NH", nh, " NKV", nkv,
               " HS", hs, causal ? " causal" : " bidirectional");
  }
};
struct SdpaKeyHash {
  size_t operator()(const SdpaKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.b, k.s, k.t_cap, k.nh, k.nkv, k.hs}) hash_mix(h, uint64_t(v));
    hash_mix(h, uint64_t(k.dtype) | uint64_t(k.causal) << 8 | uint64_t(k.backward) << 9);
    return h;
  }
};

struct SdpaPlan {
#ifdef VLM_HAS_CUDNN_FRONTEND
  std::shared_ptr<cudnn_frontend::graph::Graph> graph;
#endif
  int64_t workspace = 0;
  bool ok = false;
  std::string why;  // when !ok: the reason our kernel runs instead
};

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

// Why cuDNN's fused attention cannot take this call whatever the graph (empty if it may).
std::string precheck(const SdpaKey& k, std::initializer_list<const Tensor*> ts) {
#ifndef VLM_HAS_CUDNN_FRONTEND
  return "the cuDNN frontend was not compiled in (./run setup fetches it; docs/gpu.md, \"Attention\")";
#else
  if (k.dtype != DType::BF16) return cat(dtype_name(k.dtype), " (cuDNN's fused attention takes bf16)");
  if (k.hs % 8 != 0 || k.hs > 256) return cat("head size ", k.hs, " (cuDNN takes multiples of 8 up to 256)");
  if (k.b < 1) return "no sample";
  for (const Tensor* t : ts) {
    if (t->numel() >= (int64_t(1) << 31)) return "a tensor of 2^31 elements or more (int32 offsets)";
    if ((reinterpret_cast<uintptr_t>(t->data()) & 15) != 0) return "a tensor not 16-byte aligned";
  }
  return "";
#endif
}

#ifdef VLM_HAS_CUDNN_FRONTEND
namespace fe = cudnn_frontend;

// Tensor uids of the graphs (the variant pack maps them to pointers).
enum : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV,
  kSeqQ, kSeqKV, kOffQ, kOffK, kOffV, kOffO, kOffStats, kOffDO, kOffDQ, kOffDK, kOffDV
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

TensorPtr int_tensor(fe::graph::Graph& g, const char* name, int64_t uid, int64_t n) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

// A ragged [b, heads, s, hs] tensor over packed rows of heads*hs elements.
fe::graph::Tensor_attributes& ragged(fe::graph::Tensor_attributes& t, const SdpaKey& k, int64_t heads, int64_t uid,
                                     const TensorPtr& offsets, const char* name) {
  return t.set_name(name)
      .set_uid(uid)
      .set_dim({k.b, heads, k.s, k.hs})
      .set_stride({k.s * heads * k.hs, k.hs, heads * k.hs, 1})
      .set_ragged_offset(offsets);
}
TensorPtr ragged_input(fe::graph::Graph& g, const SdpaKey& k, int64_t heads, int64_t uid, const TensorPtr& off,
                       const char* name) {
  fe::graph::Tensor_attributes a;
  return g.tensor(ragged(a, k, heads, uid, off, name));
}
void ragged_output(const TensorPtr& t, const SdpaKey& k, int64_t heads, int64_t uid, const TensorPtr& off,
                   const char* name) {
  ragged(*t, k, heads, uid, off, name).set_output(true);
}
void stats_layout(fe::graph::Tensor_attributes& t, const SdpaKey& k, const TensorPtr& off) {
  t.set_name("stats")
      .set_uid(kStats)
      .set_dim({k.b, k.nh, k.s, 1})
      .set_stride({k.s * k.nh, 1, k.nh, 1})
      .set_data_type(fe::DataType_t::FLOAT)
      .set_ragged_offset(off);
}

std::unique_ptr<SdpaPlan> build_plan(CudaStream& cs, const SdpaKey& k) {
  auto plan = std::make_unique<SdpaPlan>();
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const float scale = float(1.0 / std::sqrt(double(k.hs)));
  auto seq_q = int_tensor(*g, "seq_q", kSeqQ, k.b), seq_kv = int_tensor(*g, "seq_kv", kSeqKV, k.b);
  auto off_q = int_tensor(*g, "off_q", kOffQ, k.b + 1), off_k = int_tensor(*g, "off_k", kOffK, k.b + 1);
  auto off_v = int_tensor(*g, "off_v", kOffV, k.b + 1), off_o = int_tensor(*g, "off_o", kOffO, k.b + 1);
  auto off_st = int_tensor(*g, "off_stats", kOffStats, k.b + 1);
  auto Q = ragged_input(*g, k, k.nh, kQ, off_q, "q");
  auto K = ragged_input(*g, k, k.nkv, kK, off_k, "k");
  auto V = ragged_input(*g, k, k.nkv, kV, off_v, "v");
  if (!k.backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa")
                    .set_generate_stats(true)
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv);
    if (k.causal) opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [O, Stats] = g->sdpa(Q, K, V, opts);
    ragged_output(O, k, k.nh, kO, off_o, "o");
    stats_layout(*Stats, k, off_st);
    Stats->set_output(true);
  } else {
    auto off_do = int_tensor(*g, "off_do", kOffDO, k.b + 1), off_dq = int_tensor(*g, "off_dq", kOffDQ, k.b + 1);
    auto off_dk = int_tensor(*g, "off_dk", kOffDK, k.b + 1), off_dv = int_tensor(*g, "off_dv", kOffDV, k.b + 1);
    auto O = ragged_input(*g, k, k.nh, kO, off_o, "o");
    auto dO = ragged_input(*g, k, k.nh, kDO, off_do, "do");
    fe::graph::Tensor_attributes sa;
    stats_layout(sa, k, off_st);
    auto Stats = g->tensor(sa);
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("sdpa_backward")
                    .set_attn_scale(scale)
                    .set_padding_mask(true)
                    .set_seq_len_q(seq_q)
                    .set_seq_len_kv(seq_kv)
                    .set_max_total_seq_len_q(k.t_cap)
                    .set_max_total_seq_len_kv(k.t_cap)
                    .set_deterministic_algorithm(true);  // no atomics: the same bits every run
    if (k.causal) opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
    ragged_output(dQ, k, k.nh, kDQ, off_dq, "dq");
    ragged_output(dK, k, k.nkv, kDK, off_dk, "dk");
    ragged_output(dV, k, k.nkv, kDV, off_dv, "dv");
  }
  cudnnHandle_t h = cs.cudnn();
  fe::error_t st = g->validate();
  if (st.is_good()) st = g->build_operation_graph(h);
  if (st.is_good()) st = g->create_execution_plans({fe::HeurMode_t::A});
  if (st.is_good()) st = g->check_support(h);
  if (st.is_good()) st = g->build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (st.is_good()) st = g->get_workspace_size(plan->workspace);
  if (!st.is_good()) {
    plan->why = cat("cuDNN: ", st.get_message());
    return plan;
  }
  plan->graph = std::move(g);
  plan->ok = true;
  return plan;
}
#endif

// The plan of this call (built at the first call of its shape class), or nullptr with
// the reason recorded in the cache (and our kernel runs).
SdpaPlan* plan_for(CudaStream& cs, const SdpaKey& k, std::initializer_list<const Tensor*> ts) {
  SdpaPlan& p = plans_of(cs).cache.get(k, [&]() -> std::unique_ptr<SdpaPlan> {
    std::string why = precheck(k, ts);
    if (!why.empty()) {
      auto plan = std::make_unique<SdpaPlan>();
      plan->why = std::move(why);
      return plan;
    }
#ifdef VLM_HAS_CUDNN_FRONTEND
    return build_plan(cs, k);
#else
    return nullptr;  // unreachable: precheck refuses
#endif
  });
  if (!p.ok) return nullptr;
  for (const Tensor* t : ts)  // the pointers of this call (the key has no alignment)
    if ((reinterpret_cast<uintptr_t>(t->data()) & 15) != 0) return nullptr;
  return &p;
}

#ifdef VLM_HAS_CUDNN_FRONTEND
// The lengths and offsets of this call, then the graph's workspace, in the scratch.
struct Aux {
  int32_t *seq, *off_q, *off_kv, *off_st;
  void* workspace;
};
Aux aux_for(CudaStream& cs, const SdpaKey& k, const SdpaPlan& p, const Tensor& cu_seqlens) {
  const size_t arr = (size_t(k.b + 1) * 4 + 255) / 256 * 256;
  char* base = static_cast<char*>(cs.scratch(4 * arr + size_t(p.workspace)));
  Aux a{reinterpret_cast<int32_t*>(base), reinterpret_cast<int32_t*>(base + arr),
        reinterpret_cast<int32_t*>(base + 2 * arr), reinterpret_cast<int32_t*>(base + 3 * arr), base + 4 * arr};
  ragged_offsets(cs.handle(), cu_seqlens.ptr<int32_t>(), int(k.b), k.nh, k.nkv, k.hs, a.seq, a.off_q, a.off_kv,
                 a.off_st);
  return a;
}

void execute(CudaStream& cs, const SdpaKey& k, const SdpaPlan& p, std::unordered_map<int64_t, void*>& pack,
             const Aux& a) {
  for (int64_t uid : {kOffQ, kOffO, kOffDO, kOffDQ}) pack[uid] = a.off_q;
  for (int64_t uid : {kOffK, kOffV, kOffDK, kOffDV}) pack[uid] = a.off_kv;
  pack[kOffStats] = a.off_st;
  pack[kSeqQ] = pack[kSeqKV] = a.seq;
  if (!k.backward)
    for (int64_t uid : {kOffDO, kOffDQ, kOffDK, kOffDV}) pack.erase(uid);
  fe::error_t st = p.graph->execute(cs.cudnn(), pack, a.workspace);
  VLM_ASSERT(st.is_good(), "attention: cuDNN failed to run a graph it built (", k.str(), "): ", st.get_message());
}
#endif

}  // namespace

bool cudnn_attention_forward(Stream& s, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  CudaStream& cs = cuda_stream(s);
  const SdpaKey key = key_of(q, k, cu_seqlens, max_seqlen, causal, false);
  SdpaPlan* p = plan_for(cs, key, {&q, &k, &v, &out, &lse});
  if (!p) return false;
#ifdef VLM_HAS_CUDNN_FRONTEND
  const int B = int(key.b);
  if (max_seqlen > 0) {
    const Aux a = aux_for(cs, key, *p, cu_seqlens);
    std::unordered_map<int64_t, void*> pack{{kQ, q.data()}, {kK, k.data()}, {kV, v.data()},
                                            {kO, out.data()}, {kStats, lse.data()}};
    execute(cs, key, *p, pack, a);
  }
  zero_tail_rows(cs.handle(), out.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * key.hs * 2);
  zero_tail_rows(cs.handle(), lse.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * 4);
  return true;
#else
  return false;
#endif
}

bool cudnn_attention_backward(Stream& s, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& cu_seqlens, int max_seqlen, bool causal) {
  CudaStream& cs = cuda_stream(s);
  const SdpaKey key = key_of(q, k, cu_seqlens, max_seqlen, causal, true);
  SdpaPlan* p = plan_for(cs, key, {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv});
  if (!p) return false;
#ifdef VLM_HAS_CUDNN_FRONTEND
  const int B = int(key.b);
  if (max_seqlen > 0) {
    const Aux a = aux_for(cs, key, *p, cu_seqlens);
    std::unordered_map<int64_t, void*> pack{{kQ, q.data()},   {kK, k.data()},    {kV, v.data()},
                                            {kO, out.data()}, {kDO, dout.data()}, {kStats, lse.data()},
                                            {kDQ, dq.data()}, {kDK, dk.data()},  {kDV, dv.data()}};
    execute(cs, key, *p, pack, a);
  }
  zero_tail_rows(cs.handle(), dq.data(), cu_seqlens.ptr<int32_t>(), B, q.size(0), key.nh * key.hs * 2);
  zero_tail_rows(cs.handle(), dk.data(), cu_seqlens.ptr<int32_t>(), B, k.size(0), key.nkv * key.hs * 2);
  zero_tail_rows(cs.handle(), dv.data(), cu_seqlens.ptr<int32_t>(), B, k.size(0), key.nkv * key.hs * 2);
  return true;
#else
  return false;
#endif
}

std::vector<std::string> attention_paths(CudaStream& s) {
  std::vector<std::string> lines;
  plans_of(s).cache.for_each([&](const SdpaKey& k, const SdpaPlan& p) {
    lines.push_back(k.str() + ": " +
                    (p.ok ? cat("cuDNN fused attention (workspace ", p.workspace, " B)") : "our kernel: " + p.why));
  });
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string cudnn_frontend_version() {
#ifdef VLM_HAS_CUDNN_FRONTEND
  return cat(CUDNN_FRONTEND_MAJOR_VERSION, ".", CUDNN_FRONTEND_MINOR_VERSION, ".", CUDNN_FRONTEND_PATCH_VERSION);
#else
  return "";
#endif
}

}  // namespace vlm::cuda

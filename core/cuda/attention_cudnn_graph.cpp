// build_sdpa_plan and run_sdpa_plan (attention_cudnn_graph.h): cuDNN's fused attention
// through the graph API of its header-only frontend (pinned by ./run setup). Layout: our
// packed tensors are cuDNN ragged tensors. q[T,NH,HS] is Q of dims [B, NH, S, HS] with
// strides [-, HS, NH*HS, 1] whose sample b starts at element off_q[b] = cu[b]*NH*HS;
// k/v likewise with NKV; lse[T,NH] is the f32 softmax-stats tensor [B, NH, S, 1] with
// strides [-, 1, NH, 1] at off_stats[b] = cu[b]*NH; the sequence lengths give the
// padding mask, so S (the graph's longest sample) is an upper bound. cuDNN's stats are
// the natural-log log-sum-exp of the scaled scores, as our lse, so either backward can
// follow either forward. Every graph takes the composite engine and, backward, cuDNN's
// deterministic algorithm (no atomics: the same bits every run).
#include "core/cuda/attention_cudnn_graph.h"
#include "core/cuda/attention_cudnn.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <unordered_map>

#ifdef VLM_HAS_CUDNN_FRONTEND
#include <cudnn_frontend.h>
#endif

namespace vlm::cuda {

#ifdef VLM_HAS_CUDNN_FRONTEND
namespace fe = cudnn_frontend;

struct SdpaGraph {
  std::shared_ptr<fe::graph::Graph> g;
};

namespace {

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

// The graph of a shape class, built and planned (build_sdpa_plan catches what it throws).
std::unique_ptr<SdpaPlan> build_graph(CudaStream& cs, const SdpaKey& k) {
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
                    .set_seq_len_kv(seq_kv)
                    // The composite engine, as the causal forward and every backward get:
                    // left to choose, a bidirectional forward would take the newer unified
                    // one, a second engine family to prove on ragged tensors and stats.
                    .set_implementation(fe::AttentionImplementation_t::COMPOSITE);
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
  if (st.is_good()) st = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (st.is_good()) st = g->check_support(h);
  if (st.is_good()) st = g->build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (st.is_good()) st = g->get_workspace_size(plan->workspace);
  if (!st.is_good()) {
    plan->why = cat("cuDNN: ", st.get_message());
    return plan;
  }
  // Beyond the scratch the model planned (attention_scratch_bytes; a stream's scratch is
  // at least kScratchMinBytes), the stream's scratch grows at this class's first call (one
  // allocation, inside a step if the class first appears there): attention_paths says
  // so, for the plan to be corrected. Nothing planned (a lone op): no bound.
  const size_t need = 4 * aux_array_bytes(k) + size_t(plan->workspace), planned = planned_scratch();
  if (planned > 0 && need > std::max(planned, kScratchMinBytes))
    plan->note = cat("; beyond the planned scratch of ", planned, " B: the stream's scratch grows at the first call");
  plan->graph = std::make_shared<SdpaGraph>(SdpaGraph{std::move(g)});
  plan->ok = true;
  return plan;
}

}  // namespace

std::unique_ptr<SdpaPlan> build_sdpa_plan(CudaStream& cs, const SdpaKey& k) {
  try {
    return build_graph(cs, k);
  } catch (const std::exception& e) {
    auto plan = std::make_unique<SdpaPlan>();
    plan->why = cat("cuDNN frontend: ", e.what());
    return plan;
  }
}

void run_sdpa_plan(CudaStream& cs, const SdpaKey& k, const SdpaPlan& p, const SdpaArgs& a) {
  std::unordered_map<int64_t, void*> pack{{kQ, a.q},       {kK, a.k},         {kV, a.v},         {kO, a.o},
                                          {kStats, a.stats}, {kSeqQ, a.seq},  {kSeqKV, a.seq},   {kOffQ, a.off_q},
                                          {kOffO, a.off_q},  {kOffK, a.off_kv}, {kOffV, a.off_kv}, {kOffStats, a.off_stats}};
  if (k.backward) {
    pack.insert({{kDO, a.d_o}, {kDQ, a.dq}, {kDK, a.dk}, {kDV, a.dv}});
    pack.insert({{kOffDO, a.off_q}, {kOffDQ, a.off_q}, {kOffDK, a.off_kv}, {kOffDV, a.off_kv}});
  }
  fe::error_t st = p.graph->g->execute(cs.cudnn(), pack, a.workspace);
  VLM_ASSERT(st.is_good(), "attention: cuDNN failed to run a graph it built (", k.str(), "): ", st.get_message());
}

#else  // no frontend: every shape class runs our kernels

struct SdpaGraph {};

std::unique_ptr<SdpaPlan> build_sdpa_plan(CudaStream&, const SdpaKey&) {
  auto plan = std::make_unique<SdpaPlan>();
  plan->why = "the cuDNN frontend was not compiled in (./run setup fetches it; docs/gpu.md, \"Attention\")";
  return plan;
}

void run_sdpa_plan(CudaStream&, const SdpaKey& k, const SdpaPlan&, const SdpaArgs&) {
  VLM_ASSERT(false, "attention: no cuDNN graph can run in a build without the frontend (", k.str(), ")");
}

#endif

std::string cudnn_frontend_version() {
#ifdef VLM_HAS_CUDNN_FRONTEND
  return cat(CUDNN_FRONTEND_MAJOR_VERSION, ".", CUDNN_FRONTEND_MINOR_VERSION, ".", CUDNN_FRONTEND_PATCH_VERSION);
#else
  return "";
#endif
}

}  // namespace vlm::cuda

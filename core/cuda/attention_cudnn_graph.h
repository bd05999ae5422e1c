// The cuDNN graph of one attention shape class, internal to the cuDNN route of
// attention_cudnn.h: built (build_sdpa_plan) and run (run_sdpa_plan) by
// attention_cudnn_graph.cpp, the one file that reads the cuDNN frontend; the route's
// dispatch (attention_cudnn.cpp) caches the plans per stream and never sees its types.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "core/cuda/cuda_backend.h"
#include "core/plan_cache.h"
#include "core/tensor.h"

namespace vlm::cuda {

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

struct SdpaGraph;  // the frontend's graph (attention_cudnn_graph.cpp)
struct SdpaPlan {
  std::shared_ptr<SdpaGraph> graph;
  int64_t workspace = 0;
  bool ok = false;
  std::string why;   // when !ok: the reason our kernel runs instead
  std::string note;  // when ok: what attention_paths adds ("; beyond the planned scratch ...")
};

// One of the 4 int32 arrays of lengths and offsets the graph reads, 256-byte aligned:
// the scratch a call needs is 4 of them, then the plan's workspace.
inline size_t aux_array_bytes(const SdpaKey& k) { return (size_t(k.b + 1) * 4 + 255) / 256 * 256; }

// The graph of k, built and planned on cs's cuDNN handle, or the reason it is not (the
// frontend not compiled in, cuDNN's refusal, an exception of the frontend). Never throws.
std::unique_ptr<SdpaPlan> build_sdpa_plan(CudaStream& cs, const SdpaKey& k);

// The device pointers of one call of a plan (the d* only for a backward).
struct SdpaArgs {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *stats = nullptr;
  void *d_o = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  int32_t *seq = nullptr, *off_q = nullptr, *off_kv = nullptr, *off_stats = nullptr;
  void* workspace = nullptr;
};
// Enqueues the plan's graph on cs (an internal error if cuDNN refuses what it built).
void run_sdpa_plan(CudaStream& cs, const SdpaKey& k, const SdpaPlan& p, const SdpaArgs& a);

}  // namespace vlm::cuda

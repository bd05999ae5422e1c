// TransformerStack: L pre-norm blocks (nn/block.h) over the residual stream, with their
// planned activations and recomputation. The language backbone runs its layers through
// it (causal, TP, SP); the vision encoder uses it bidirectionally at TP = 1. It knows
// nothing of vocabularies or embeddings: the owner writes h[0] (input()), reads h[L]
// (output()) and owns the parameter table and the activation plan.
//
// Use (the owner's order):
//   TransformerStack st(block_cfg, L, tp, names);       // names: BlockParamNames
//   specs += st.param_specs(init_std);  table = ParamTable(specs, ...); table.allocate(b);
//   st.bind(table);
//   st.plan(plan);  (+ the owner's own buffers)  plan.allocate(b, max_T, max_Ts);
//   per micro-batch: plan.cut(T, Ts); write input(); st.forward(ctx, seq);
//                    dres = dL/d output(); st.backward(ctx, seq, dres) -> dres = dL/d input()
// Decoding with a KV cache (nn/kv_cache.h; causal stacks): forward(ctx, seq, &cache,
// slots) also writes every layer's k/v of the batch (the prefill); st.plan_decode(p2)
// declares the activations of one decode step into a second plan (rows = p2's T, no
// SP: a step's few rows are replicated on every rank; p2.allocate(b, N, N)); per step:
// p2.cut(N, N); write decode_state(); st.decode(ctx, rows, cache); read decode_state().
// Activations planned (nn/activations.h): h[0..L] [Ts,C]; BlockActs x L (1 under full
// recompute); AttentionCore x L (1 under selective or full); one Scratch (with SwiGLU's
// act, shared by the layers). Without SP the full-width inputs of the TP regions alias
// the norm outputs, y aliases partial and dnorm aliases dfull_b. Their dtype is the
// plan's (bf16 under train.precision=bf16), the statistics f32 (nn/act_plan.h). The
// forward computes block l+1's first norm with block l's last add (nn/block.h), inside
// a range of layers run together and without a layer fetch.
// Gradients follow the rule of nn/context.h.
// The stack is neither copied nor moved: the plan binds its fields by address.
#pragma once
#include <functional>
#include <vector>

#include "nn/act_plan.h"
#include "nn/block.h"
#include "nn/kv_cache.h"

namespace vlm {

// The parameters of every block of a stack of n_layers, layer by layer (block_param_specs).
std::vector<ParamSpec> stack_param_specs(const BlockConfig& cfg, int n_layers, int tp, float init_std,
                                         const BlockParamNames& names);

// Declares a norm's output `out` [Ts,C], its statistics `mean` (LayerNorm only) and
// `rstd` [Ts], and `x_full` [T,C], the full-width input of the TP region that follows
// it (an alias of `out` without SP).
void plan_norm_acts(ActPlan& p, const BlockConfig& cfg, int tp, Tensor* out, Tensor* mean, Tensor* rstd,
                    Tensor* x_full);

// Called with (stream, layer, next) before a layer's weights are read, when the weights
// are not resident (ZeRO-3: the backbone outside the training step's own gathers,
// train/trainer.cpp; the encoder, optim/dp_grads.h). `next` is the layer the same pass
// runs after it (-1: none), so that a fetch may start gathering it (prefetch).
using LayerFetch = std::function<void(Stream&, int, int)>;
// Called with (stream, layer, false) before a layer's backward and (stream, layer, true)
// after it, when the layer's gradients live in a pool slot and leave it per use (ZeRO >= 2
// on a stack that runs its layers itself: the vision encoder, optim/dp_grads.h).
using LayerGrads = std::function<void(Stream&, int, bool)>;

class TransformerStack {
 public:
  // cfg must satisfy BlockConfig::check(tp) (the owner validates its options first).
  TransformerStack(const BlockConfig& cfg, int n_layers, int tp, BlockParamNames names);
  TransformerStack(const TransformerStack&) = delete;
  TransformerStack& operator=(const TransformerStack&) = delete;

  const BlockConfig& config() const { return cfg_; }
  const LocalDims& local() const { return local_; }
  const Block& block(int l) const { return blocks_[size_t(l)]; }

  // stack_param_specs of this stack.
  std::vector<ParamSpec> param_specs(float init_std) const;
  // Binds every block to its views in `t` (allocated, split over the same tp).
  void bind(const ParamTable& t);

  // Declares the stack's activations and scratch into `p` (once, before p.allocate).
  void plan(ActPlan& p);
  const Tensor& input() const { return h_.front(); }   // h[0]  [Ts,C]
  const Tensor& output() const { return h_.back(); }   // h[L]  [Ts,C]
  const Scratch& scratch() const { return sc_; }

  // h[0] -> h[L]; keeps what backward needs (per the recompute mode). With a cache,
  // also writes each layer's k/v rows into it at `slots` ([T] i32, -1 = not kept).
  void forward(TpContext& ctx, const PackedSeqs& seq, const KvCache* cache = nullptr,
               const Tensor& slots = Tensor{}) const;
  // The same without a cache for layers [l0, l1) only (h[l0] -> h[l1]); calling it for
  // consecutive ranges from the bottom runs forward's ops in forward's order.
  void forward_layers(TpContext& ctx, const PackedSeqs& seq, int l0, int l1) const;
  // Decoding: the step's activations (once, into a plan of its own, see above), the
  // rows' residual stream [N,C] (input and output: the step updates it in place), and
  // one step for the rows `rows` (ctx without SP).
  void plan_decode(ActPlan& p);
  const Tensor& decode_state() const { return dec_.h; }
  void decode(TpContext& ctx, const DecodeRows& rows, const KvCache& cache) const;
  // dres [Ts,C]: dL/dh[L] on entry, dL/dh[0] on exit; parameter grads +=. Re-runs
  // blocks or attention cores first as the recompute mode requires.
  void backward(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres) const;
  // The same for layers [l0, l1) only (l1 down to l0): dres = dL/dh[l1] on entry,
  // dL/dh[l0] on exit. backward(ctx, seq, dres) = backward_layers(ctx, seq, dres, 0, L);
  // calling it for consecutive ranges from the top runs the same ops in the same order.
  void backward_layers(TpContext& ctx, const PackedSeqs& seq, const Tensor& dres, int l0, int l1) const;
  int n_layers() const { return n_layers_; }
  // Asks b for the device scratch of this stack's attention over up to max_T tokens, at
  // the dtype its activations were planned in (after the plan is allocated): the
  // model's part of "no allocation inside a step" (docs/gpu.md, "Memory inside a step").
  void reserve_scratch(Backend& b, int64_t max_T) const;
  // The hook forward, forward_layers, decode and backward_layers call before each layer
  // (none by default; the training step under ZeRO-3 gathers in tasks of its own and
  // unsets it: train/step.h).
  void set_layer_fetch(LayerFetch f) { fetch_ = std::move(f); }
  const LayerFetch& layer_fetch() const { return fetch_; }
  // The hook backward_layers calls around each layer's backward (none by default).
  void set_layer_grads(LayerGrads g) { grads_ = std::move(g); }
  // Every layer's fetch, in order, and nothing else (a rank without rows in a decoding
  // step that the DP group runs in lockstep: model/generate.h).
  void fetch_layers(Stream& s) const;

 private:
  const BlockActs& saved(int l) const { return saved_[cfg_.recompute == Recompute::Full ? 0 : size_t(l)]; }
  const AttentionCore& core(int l) const { return core_[cfg_.recompute == Recompute::None ? size_t(l) : 0]; }
  void check_context(const TpContext& ctx) const;
  // Block l's forward, run in the range [l0, l1) (the cross-block fusion inside it).
  void forward_block(TpContext& ctx, const PackedSeqs& seq, int l, int l0, int l1) const;

  BlockConfig cfg_;
  int n_layers_;
  int tp_;
  LocalDims local_;
  BlockParamNames names_;
  std::vector<Block> blocks_;
  std::vector<Tensor> h_;              // L + 1 residual-stream tensors
  std::vector<BlockActs> saved_;       // L, or 1 under full recompute
  std::vector<AttentionCore> core_;    // L without recompute, else 1
  Scratch sc_;
  bool planned_ = false;
  LayerFetch fetch_;
  LayerGrads grads_;
  struct DecodeActs {  // one decode step's rows, N of them
    Tensor h;          // [N,C] the residual stream
    BlockActs block;   // shared by the layers (nothing is kept for backward)
    Tensor att;        // [N,NHl,HS]
    Scratch sc;        // partial (y aliases it)
  };
  DecodeActs dec_;
  bool decode_planned_ = false;
};

}  // namespace vlm

// Backbone: the tensor-parallel language model: embedding (vocab-parallel tokens, or
// caller-given embeddings; + learned positions for gpt2), L causal pre-norm blocks (an
// nn/ TransformerStack), final norm, vocab-parallel output layer and cross-entropy.
// Every rank of a TP group constructs it with the same config and calls every method in
// the same order with the same batch (the inputs are replicated over the TP group).
//
// Input: one packed micro-batch of B variable-length samples, T tokens in all
// (llm/lm_input.h): token ids, caller embeddings, or both mixed (the VLM's visual rows
// before each sample's text), targets (the loss mask), positions restarting per sample.
// loss = sum over counted tokens / loss_norm (default: their number).
// With sequence parallelism T must be a multiple of tp.
//
// Memory: parameters and gradients live in two arenas (ParamTable), activations in one
// arena (ActPlan: the stack's buffers and the head's below) planned at construction for
// max_tokens tokens (activation_bytes() is exact).
// Gradients follow the rule of nn/context.h: parameter grads add up over backward calls
// (micro-batches) until zero_grads(). After the last micro-batch call finalize_grads()
// once (before any DP reduction or optimizer step): it all-reduces the gradients that
// are partial per rank (ParamSpec::tp_partial_grad).
//
// Activation recomputation (config.recompute): nn/block_config.h.
//
// Communication per step, f32, T tokens, tp > 1, as counted by the Communicator (bytes
// of the local input buffer of each call); E = 1 for token ids and the mixed input, 0 for
// embeddings input:
//   no SP: all_reduce = 4*T*C*(E + 4L + 1) + 4*3T + 4*R
//          (E: embedding fwd; per block 2 fwd (o_proj, down_proj) + 2 bwd (q/k/v and
//           gate/up input); 1: lm_head input bwd; 3T: loss max + (sumexp, target);
//           R: replicated KV weight/bias elements when NKV < tp, finalize_grads)
//   SP:    all_gather = 4*(T/tp)*C*(E + 4L + 1) + [embeddings input: 4*(T/tp)*C]
//          reduce_scatter = 4*T*C*(E + 4L + 1)
//          all_reduce = 4*3T + 4*(R + S)  (S: elements of norms, row biases and
//           positions, partial on sequence shards)
// Full recomputation adds the forward collectives of every block once more.
//
// Decoding with a KV cache (nn/kv_cache.h, llm/README.md, "KV cache (decoding)"): plan_decoding once
// (the cache for max_seqs sequences of max_len rows, the activations of a step of up to
// max_seqs rows, the gather buffers: decode_bytes()); prefill(in) is forward(in) (SP as
// configured, no loss) that also keeps every layer's k/v; decode_step then costs one
// row's forward per sequence, always without SP (the N rows of a step are replicated on
// every rank, so any tp works and nothing is padded). Per step of N rows, tp > 1:
//   all_reduce = 4*N*C*(1 + 2L)  (embedding, o_proj and down_proj of every block)
// and gather_step_logits adds all_gather = 4*N*Vl.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "llm/embedding_parallel.h"
#include "llm/lm_input.h"
#include "llm/loss_parallel.h"
#include "llm/model_config.h"
#include "nn/act_plan.h"
#include "nn/kv_cache.h"
#include "nn/norm.h"
#include "nn/param_table.h"
#include "nn/stack.h"

namespace vlm {

class Backbone {
 public:
  // Validates cfg for tp.size() (UserError), builds the parameter table (values zero,
  // call init() or load them) and plans the activation arena for max_tokens tokens.
  // grads = false: frozen, no gradient arena (nn/param_table.h); backward still gives
  // d_embeddings.
  // precision BF16: the table gets its bf16 working copy (nn/param_table.h; refresh it
  // with params().refresh_working after every change of the values).
  // dp: the ZeRO sharding of the table (nn/param_layout.h); its layers are the pooled
  // units (units: the embedding, layer 0 .. L-1, the output head).
  Backbone(const ModelConfig& cfg, Backend& backend, Communicator& tp, int64_t max_tokens, bool grads = true,
           Precision precision = Precision::FP32, DpSharding dp = {});
  ~Backbone();
  Backbone(const Backbone&) = delete;
  Backbone& operator=(const Backbone&) = delete;

  const ModelConfig& config() const { return cfg_; }
  ParamTable& params() { return *params_; }
  const ParamTable& params() const { return *params_; }
  // Initialises every parameter from `seed` (init.h: independent of tp and order).
  void init(uint64_t seed);

  // Forward of one micro-batch; keeps what backward needs. The loss (identical on every
  // TP rank) goes to loss [1] (f32) on s: the per-token losses summed in row order, times
  // 1/loss_norm; 0 without targets. Nothing waits for the device (the training step
  // reads it after its graph).
  void forward(Stream& s, const LmInput& in, const Tensor& loss);
  // The same in parts (a training step under ZeRO-3 gathers each layer's weights just
  // before it, train/step.h): forward_begin (the embedding), forward_layers over
  // consecutive ranges from the bottom, forward_end (final norm, output layer, loss):
  // exactly forward's ops in forward's order.
  void forward_begin(Stream& s, const LmInput& in);
  void forward_layers(Stream& s, const LmInput& in, int l0, int l1);
  void forward_end(Stream& s, const LmInput& in, const Tensor& loss);
  // The same, returning the loss: read on the host (copy_to_host, a synchronisation of
  // s; decoding, evaluation, checks).
  float forward(Stream& s, const LmInput& in);
  // Backward of the last forward (same `in`). Parameter grads +=. When the input has
  // caller rows and d_embeddings is defined ([T,C] for embeddings input, [Tv,C] for the
  // mixed input), it receives dL/d(embeddings) of those rows (overwrite; the full
  // gradient, identical on every TP rank).
  void backward(Stream& s, const LmInput& in, const Tensor& d_embeddings = Tensor{});
  // backward in parts (a training step reduces the last layers' gradients over DP while
  // the earlier layers' backward still runs, train/step.h): backward_head (loss, output
  // layer, final norm), then backward_layers over consecutive ranges from the top
  // (l1 = L first, down to l0 = 0), then backward_embedding: exactly backward's ops in
  // backward's order.
  void backward_head(Stream& s, const LmInput& in);
  void backward_layers(Stream& s, const LmInput& in, int l0, int l1);
  void backward_embedding(Stream& s, const LmInput& in, const Tensor& d_embeddings = Tensor{});
  // All-reduces the TP-partial gradients (see above); once per optimizer step.
  void finalize_grads(Stream& s);
  // The same for the gradients in elements [begin, end) of the gradient arena only
  // (those of the parameters that start there); disjoint ranges covering the arena =
  // finalize_grads.
  void finalize_grads(Stream& s, int64_t begin, int64_t end);
  // The flat space is [embeddings][layer 0] .. [layer L-1][final norm, lm_head], one
  // layout unit each (llm/param_specs.h, nn/param_layout.h): where layer l's elements
  // start (l = L: where the head's start), and the unit of layer l.
  int64_t layer_grad_begin(int l) const;
  int layer_unit(int l) const { return l + 1; }
  int n_layers() const { return cfg_.n_layers; }
  void zero_grads() { params_->zero_grads(); }
  // The side stream of the TP collectives that the next ops do not wait for
  // (nn/tp_side.h), or none; the forward and backward after the call use it.
  void set_tp_side(TpSide* side) { side_ = side; }
  // The stack's layer fetch (nn/stack.h): the backbone's layers gathered on demand.
  void set_layer_fetch(LayerFetch f) { stack_.set_layer_fetch(std::move(f)); }
  const LayerFetch& layer_fetch() const { return stack_.layer_fetch(); }
  void fetch_layers(Stream& s) const { stack_.fetch_layers(s); }

  // Results of the last forward: this rank's logits [T, Vl] (columns
  // [vocab_offset(), +Vl); padding columns hold -1e30) and per-token losses [T].
  Tensor logits() const { return head_.logits; }
  Tensor losses() const { return head_.losses; }
  int64_t vocab_offset() const { return out_.vocab_offset; }
  int64_t local_vocab() const { return cfg_.local_vocab(tp_.size()); }
  // The full logits [T, V] (unpadded) on the host, gathered over the TP group
  // (a collective; for checks and the `vlm lm logits` command, not for training).
  Tensor gather_logits(Stream& s);

  // Decoding with a KV cache (above). prefill: sample b < n_seqs of `in` becomes cached
  // sequence b (later samples, e.g. SP padding, are not kept); decode_step: token ids[i]
  // appended to cached sequence seqs[i] (distinct). After either, step_logits() holds
  // this rank's logits [N, Vl] of the new last row of each sequence (row i: prefill's
  // sample i, or the step's seqs[i]); gather_step_logits gathers them over the TP group
  // into a host [N, V] view (a collective; valid until the next call). Collective calls
  // in the same order on every TP rank, like forward.
  void plan_decoding(int64_t max_seqs, int64_t max_len);
  void prefill(Stream& s, const LmInput& in, int64_t n_seqs);
  void decode_step(Stream& s, const std::vector<int32_t>& seqs, const std::vector<int32_t>& ids);
  Tensor step_logits() const { return dec_.logits; }
  Tensor gather_step_logits(Stream& s);
  const KvCache* kv_cache() const { return cache_.get(); }
  size_t decode_bytes() const;

  size_t param_bytes() const { return params_->param_bytes(); }
  size_t activation_bytes() const { return acts_.bytes(); }
  int64_t max_tokens() const { return max_tokens_; }

 private:
  // The activations of the embedding and the output head (the blocks' are the stack's).
  struct HeadActs {
    Tensor ln, ln_mean, ln_rstd;  // final norm [Ts,C], [Ts] (LayerNorm only), [Ts]
    Tensor ln_full;               // [T,C] its gathered output (aliases ln without SP)
    Tensor logits, dlogits;       // [T,Vl]
    Tensor pad_fill;              // [T,Vl-valid] the constant -1e30 (only with padding columns)
    Tensor rowmax, stats;         // [T], [2T] (sumexp, then target logit)
    Tensor losses, dlosses;       // [T]
    Tensor dres;                  // [Ts,C] residual-stream gradient
  };
  // One decode step's output head, N rows (the blocks' are the stack's decode activations).
  struct DecodeHead {
    Tensor ln, ln_mean, ln_rstd;  // [N,C], [N] (LayerNorm only), [N]
    Tensor logits;                // [N,Vl]
    Tensor pad_fill;              // [N,Vl-valid] the constant -1e30 (only with padding columns)
    Tensor pos;                   // [N,C] learned positions (gpt2)
  };
  void bind_params();
  void plan_activations();
  // forward and prefill: cache_slots defined = keep k/v there; loss = compute the
  // per-token losses. Returns the divisor of their sum, or 0 when there is no loss.
  double run_forward(Stream& s, const LmInput& in, const Tensor& cache_slots, bool loss);
  void run_embedding(Stream& s, const LmInput& in);  // checks `in`, cuts, the embedding -> h[0]
  double run_head(Stream& s, const LmInput& in, bool loss);  // h[L] -> logits (and the losses)
  // Cuts every activation view to T tokens (Ts on the residual stream).
  void cut(int64_t T);
  TpContext context(Stream& s) const { return TpContext{s, tp_, sp_, side_}; }
  int64_t stream_rows(int64_t T) const { return sp_ ? T / tp_.size() : T; }

  ModelConfig cfg_;
  Backend& backend_;
  Communicator& tp_;
  int64_t max_tokens_;
  bool sp_;
  TpSide* side_ = nullptr;
  Tensor loss_;  // [1] f32: the host-returning forward's loss
  std::unique_ptr<ParamTable> params_;
  VocabParallelEmbedding emb_;
  Tensor wpe_, dwpe_;  // [max_pos, C] (gpt2)
  TransformerStack stack_;
  Norm lnf_;
  VocabParallelOutput out_;
  HeadActs head_;
  ActPlan acts_;
  int64_t last_T_ = 0;
  // Decoding (plan_decoding).
  std::unique_ptr<KvCache> cache_;
  ActPlan dec_acts_;
  DecodeHead dec_;
  Tensor dec_ids_;                           // [max_seqs] i32: a step's ids, or a prefill's last rows
  Tensor dec_gather_;                        // [tp*max_seqs, Vl] (tp > 1)
  std::vector<float> dec_all_, dec_full_;    // host [tp*max_seqs*Vl], [max_seqs*V]
  std::vector<int32_t> dec_cu_, dec_rows_;   // host staging (reserved)
  int64_t dec_n_ = 0;
};

}  // namespace vlm

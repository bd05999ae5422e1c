// VlmModel: the whole vision-language model of one rank, assembled from its parts:
//   vision encoder (vision/encoder.h, replicated)  -> cell features F [B, G*G, d_v]
//   prompt query: mean input embedding of each prompt (the backbone's vocab-parallel
//                 table, no copy of it) -> q [B, C]
//   relevance stage (scorers/stage.h: three scorers, balancer, LOD allocator, tokens)
//   projector (vision/projector.h, replicated): visual tokens [Tv, d_v] -> [Tv, C]
//   backbone (llm/backbone.h, tensor-parallel) over [visual | prompt | caption] per sample
// and the pieces of one micro-batch's forward and backward, which train/step.h runs as
// the tasks of a graph. Pieces must be called in the order of the step:
//   load, vision_forward, query_forward, scorers_forward (or its three parts: prepare,
//   the three scorers in any order or at once, finish), llm_forward_backward (projector
//   forward, backbone forward + backward, projector backward; or its parts llm_forward,
//   llm_backward over layer ranges from the top), scorers_backward,
//   query_backward, vision_backward
// and finish_grads() once per optimizer step, after the last micro-batch's backward.
// Front-end slots (model/front_slot.h): a micro-batch's pieces name the slot that holds
// its state. VlmConfig::front_slots = 2 lets micro-batch m+1 (the other slot) run load
// .. scorers_finish while m runs llm_forward_backward and its backward; a slot is free
// again after its micro-batch's scorers_backward, query_backward and vision_backward.
// The projector and the backbone are shared: llm_forward_backward runs one micro-batch
// at a time. The second slot's encoder uses the model encoder's parameters, so its
// vision_backward accumulates into the same gradients: the two slots' vision_backward
// must not run at once (the step runs them on one stream).
// Which of them communicate on the TP group: query_forward (the all-reduce of the
// vocab-parallel lookup), llm_forward_backward, the relevance stage when its placement
// communicates (stage().scorers_apart() is false), and finish_grads;
// query_backward does not (the prompt rows are never sequence-sharded). The step issues
// these from one stream so that every rank posts its TP collectives in the same order.
// When the encoder trains, scorers_backward also lets the placement complete the
// encoder's feature gradients [B, G*G, d_v] (ScorerPlacement::reduce_feature_grads:
// batch-split's stage writes those of its own images only).
//
// Loss: the backbone's cross-entropy over caption tokens only, divided by
// MicroBatch::loss_norm (the caption tokens of the whole optimizer step over every DP
// rank), so the per-micro-batch losses of all ranks add up to the step's mean loss and
// the gradients add up (no averaging) over micro-batches and DP ranks. The step's
// llm_forward_backward leaves it on the device; evaluation's reads it on the host.
// Memory: every part plans its parameters and activations at construction for
// max_images images of at most max_text text tokens each (train/step.h does not allocate).
// Decoding: the backbone's KV cache (llm/backbone.h) is planned at the first
// decode_start, once, for max_images sequences of lod.max_tokens + max_text rows.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/backbone.h"
#include "llm/embedding_parallel.h"
#include "llm/sampling.h"
#include "model/front_slot.h"
#include "scorers/stage.h"
#include "vision/encoder.h"
#include "vision/projector.h"

namespace vlm {

// The four trainable modules, in the order of their parameters' last gradient in backward.
enum class ModuleId { Llm, Projector, Scorers, Vision };
inline constexpr int kNumModules = 4;
const char* module_name(ModuleId m);  // "llm", "projector", "scorers", "vision"

struct VlmConfig {
  VisionConfig vision;
  ScorerOptions scorers;
  ModelConfig llm;
  int64_t max_images = 8;  // images per micro-batch (per rank)
  int64_t max_text = 64;   // prompt + caption tokens per sample
  float projector_std = 0.02f;
  // train.precision (docs/training.md, "Numerics"): at BF16 the vision encoder, projector and
  // backbone hold a bf16 working copy of their weights (refresh_working_weights()).
  Precision precision = Precision::FP32;
  // Frozen modules (by ModuleId) get no gradient arena and skip their weight gradients.
  std::array<bool, kNumModules> frozen{};
  // train.zero over this rank's DP group: how every table's storage is sharded
  // (nn/param_layout.h). Set by the trainer and the planner for a rank; zero 0 elsewhere.
  DpSharding sharding;
  // Front-end slots (model/front_slot.h): 1, or 2 to pipeline micro-batches (train/step.h;
  // resolve_vlm_config sets 2 when train.micro_batches >= 2). The second costs a second
  // encoder (weights, gradients, activations) and a second set of front-end buffers.
  int front_slots = 1;
  // Tokens of the backbone's packed micro-batch at most: every image at lod.max_tokens
  // plus its text, plus tp - 1 rows of sequence-parallel padding, rounded up to a multiple
  // of tp (the backbone's arena under sequence parallelism).
  int64_t max_backbone_tokens(int tp) const;
};

// One micro-batch on the host. Sample i: image i, its prompt (BOS + instruction) and its
// caption (the tokens after BOS, EOS included: what the loss counts; empty for a padding
// repeat of the sampler, which then counts nothing).
struct MicroBatch {
  int64_t images = 0;
  const uint8_t* pixels = nullptr;  // [B,S,S,3] RGB u8
  const float* texture = nullptr;   // [B,13,G,G] (when vision.texture)
  std::vector<std::vector<int32_t>> prompt, caption;  // [B] each
  double loss_norm = 1.0;           // divisor of the summed loss (see above)
  uint64_t seed = 0;                // lod.policy=random, lod.explore
  LodConfig::Step lod;              // the LOD training schedule at this step (none elsewhere)
  int64_t counted() const;          // caption tokens (= counted targets)
};

// Where a module's parameters live, for the optimizer and the DP reduction.
struct ModuleParams {
  ModuleId id;
  ParamTable* table;
  bool tp_split;  // the table is split over the TP group (else replicated on every TP rank)
};

class VlmModel {
 public:
  // cfg validated for tp (VlmConfig parts' validate). `self`: a size-1 communicator on
  // the backend's device (the replicated encoder's).
  VlmModel(const VlmConfig& cfg, Backend& backend, Communicator& tp, Communicator& self);
  ~VlmModel();
  VlmModel(const VlmModel&) = delete;
  VlmModel& operator=(const VlmModel&) = delete;

  const VlmConfig& config() const { return cfg_; }
  void init(uint64_t seed);  // every part from (seed, parameter name): independent of tp
  std::vector<ModuleParams> modules();
  void zero_grads();
  // Re-rounds every bf16 working copy from the f32 master weights (no-op at FP32): after
  // init, a load and every optimizer step. On the backend's default stream.
  void refresh_working_weights();
  // Bytes of the bf16 working copies on this rank (0 at FP32).
  size_t working_weight_bytes();

  // The model's encoder (slot 0's: the weights the optimizer, checkpoints and imports
  // see), and the stage of the last micro-batch loaded (its activations: offsets, balancer weights).
  VisionEncoder& vision() { return slots_[0]->vision(); }
  RelevanceStage& stage() { return slots_[size_t(cur_)]->stage(); }
  Projector& projector() { return *projector_; }
  Backbone& llm() { return *llm_; }
  int tp_size() const { return tp_.size(); }
  void set_tp_side(TpSide* side) { llm_->set_tp_side(side); }  // Backbone::set_tp_side
  // ZeRO-3 outside the training step (evaluation, decoding): each backbone layer's weights
  // fetched just before its use (nn/stack.h LayerFetch). While one is set, every DP rank
  // must run the same layers in the same order: the evaluation's decoding keeps the DP
  // group in lockstep (model/generate.h), fetching without computing when a rank has
  // nothing left to decode (fetch_layers).
  void set_layer_fetch(LayerFetch f) { llm_->set_layer_fetch(std::move(f)); }
  const LayerFetch& layer_fetch() const { return llm_->layer_fetch(); }
  void fetch_layers(Stream& s) const { llm_->fetch_layers(s); }
  // ZeRO >= 2: the encoder's gathers and gradient reductions around each of its blocks,
  // in and out of their pool slots, on every slot's encoder (VisionEncoder::set_zero_hooks;
  // optim/dp_grads.h attaches them); vision_pooled() says whether the encoder needs them.
  void set_vision_hooks(const LayerFetch& fetch, const LayerGrads& grads);
  bool vision_pooled() const { return !slots_[0]->vision().params().layout().pooled_units().empty(); }
  int front_slots() const { return int(slots_.size()); }

  // The pieces of one micro-batch (order above), on front-end slot `slot`.
  void load(Stream& s, const MicroBatch& mb, int slot);
  void vision_forward(Stream& s, int slot);
  void query_forward(Stream& s, int slot);
  void scorers_forward(Stream& s, int slot);  // = the three parts below, in order
  void scorers_prepare(Stream& s, int slot);  // the stage's forward_prepare
  void scorer_forward(Stream& s, int slot, int k) { slots_[size_t(slot)]->stage().forward_scorer(s, k); }  // k = 0, 1, 2, at once
  void scorers_finish(Stream& s, int slot);   // the stage's forward_finish, then the LM input is packed
  // Projector + backbone forward and backward: loss [1] (device, f32) receives this
  // rank's share of the step's loss (identical on every TP rank); nothing waits for it.
  void llm_forward_backward(Stream& s, int slot, const Tensor& loss);
  // The same in parts (train/step.h splits the last micro-batch's): llm_forward, then
  // llm_backward over consecutive layer ranges [l0, l1) from the top (l1 = L also runs
  // the backbone head's backward first; l0 = 0 the embedding's and the projector's
  // after): the ops of llm_forward_backward in its order. finalize: also all-reduce the
  // TP-partial gradients of llm_grad_range(l0, l1), complete after the last micro-batch's
  // part (then finish_grads(s, true) leaves them alone).
  void llm_forward(Stream& s, int slot, const Tensor& loss);
  void llm_backward(Stream& s, int slot, int l0, int l1);
  // llm_forward in parts (ZeRO-3 gathers each layer's weights just before it): begin
  // (projector forward, the embedding), the layers over consecutive ranges from the
  // bottom, end (final norm, output layer, the loss): llm_forward's ops in its order.
  void llm_forward_begin(Stream& s, int slot);
  void llm_forward_layers(Stream& s, int slot, int l0, int l1);
  void llm_forward_end(Stream& s, int slot, const Tensor& loss);
  // The backbone's flat elements [begin, end) (nn/param_layout.h) that llm_backward(l0,
  // l1) completes: layers [l0, l1), with the head's (the space's end) when l1 = L. The
  // embedding's, [0, llm_grad_range(0, L).first), also get query_backward's.
  std::pair<int64_t, int64_t> llm_grad_range(int l0, int l1) const;
  // Layer l's flat elements in the backbone's table (its layout unit), without the head's.
  std::pair<int64_t, int64_t> llm_layer_range(int l) const { return llm_->params().layout().unit_range(llm_->layer_unit(l)); }
  // All-reduces over TP the backbone's TP-partial gradients that start in [begin, end)
  // (nn/param_table.h finalize_tp_grads): a part's, complete for the step or, for a pooled
  // layer (train/step.h, ZeRO >= 2), for the micro-batch.
  void llm_finalize(Stream& s, int64_t begin, int64_t end) { llm_->finalize_grads(s, begin, end); }
  void scorers_backward(Stream& s, int slot);
  void query_backward(Stream& s, int slot);
  void vision_backward(Stream& s, int slot);

  // Evaluation and decoding (slot 0): everything before the backbone, in order (load,
  // vision_forward, query_forward, scorers_forward), then the projector and backbone
  // forward (and backward unless `backward` is false), the loss read on the host.
  void front_forward(Stream& s, const MicroBatch& mb);
  float llm_forward_backward(Stream& s, bool backward = true);
  // Greedy decoding (a full recompute per token): after front_forward, the most likely
  // next token of every sample given its prompt and `generated` [B] so far (the logits are gathered over the TP
  // group: a collective). Padding vocabulary columns are never chosen.
  std::vector<int32_t> greedy_next(Stream& s, const std::vector<std::vector<int32_t>>& generated);
  // Decoding with the backbone's KV cache, after front_forward: decode_start runs the projector and the backbone once over every
  // sample's [visual | prompt] (the prefill) and returns each sample's first token;
  // decode_next appends tokens[b] to sample b and returns the next token of every sample
  // at the cost of one token's forward; tokens[b] < 0 marks sample b finished (no row,
  // its result is -1). Tokens are chosen by `o` (llm/sampling.h: greedy gives the tokens
  // of greedy_next). Collective over the TP group; every rank returns the same tokens.
  std::vector<int32_t> decode_start(Stream& s, const DecodeOptions& o = DecodeOptions{});
  std::vector<int32_t> decode_next(Stream& s, const std::vector<int32_t>& tokens);
  // Once per optimizer step: the TP-partial gradients of the backbone (but those in
  // [done_begin, done_end), which the step's llm_finalize calls did) and the placement's
  // gradient traffic of the stage.
  void finish_grads(Stream& s, int64_t done_begin = 0, int64_t done_end = 0);

  // The last micro-batch loaded: the visual tokens per image, the LM input (for decoding).
  const std::vector<int64_t>& visual_offsets() const { return slots_[size_t(cur_)]->stage().offsets(); }
  int64_t visual_tokens(int slot) const { return slots_[size_t(slot)]->stage().offsets().back(); }
  const LmInput& lm_input() const { return slots_[size_t(cur_)]->input; }
  // The activation arenas: every slot's encoder, projector, backbone.
  int64_t activation_bytes() const;

 private:
  void pack_input(Stream& s, FrontSlot& f);  // f.input from f.samples and f's visual tokens (host work + upload on s)
  void projector_forward(Stream& s, FrontSlot& f);
  // The tokens of the sequences `seqs` from the backbone's last step logits (decoding).
  std::vector<int32_t> choose_next(Stream& s, const std::vector<int32_t>& seqs);

  VlmConfig cfg_;
  Backend& backend_;
  Communicator& tp_;
  std::vector<std::unique_ptr<FrontSlot>> slots_;  // front_slots of them
  std::unique_ptr<ParamTable> stage_params_;       // the scorers' one table, bound by every slot's stage
  std::unique_ptr<Projector> projector_;
  std::unique_ptr<Backbone> llm_;
  VocabParallelEmbedding prompt_emb_;  // views of the backbone's table and its gradient

  // Shared by the slots (used inside one task at a time, all on the llm stream).
  Tensor prompt_rows_, dprompt_rows_;  // [Pmax, C]
  Tensor visual_, dvisual_;            // [Tv, C]
  int cur_ = 0;                        // the slot of the last load
  // Decoding (decode_start, decode_next): options, tokens chosen per sample, scratch.
  DecodeOptions dec_opts_;
  std::vector<uint64_t> dec_steps_;
  std::vector<int32_t> dec_seqs_, dec_ids_, dec_order_;
  std::vector<double> dec_weights_;
};

}  // namespace vlm

// LmInput: one packed micro-batch of the backbone (llm/backbone.h), and its builders.
// B variable-length samples, T rows in all; sample i is rows [cu[i], cu[i+1]); positions
// restart at 0 in every sample; attention never crosses samples. Each row is one of:
//   a token row   its id [T] goes through the vocab-parallel embedding
//   a caller row  its embedding [C] is given by the caller, replicated over the TP group
// Three layouts, told apart by which tensors are defined:
//   token path       ids [T]                         every row a token row
//   embeddings path  embeddings [T,C]                every row a caller row
//   mixed path       ids [T] + visual_rows [Tv] + embeddings [Tv,C]: the rows listed in
//                    visual_rows (ascending) are caller rows with the embeddings in
//                    that order, their ids are kVisualRowId; the others are token rows
//                    (make_vlm_input: [visual | prompt | caption] per sample)
// targets [T]: the id the row predicts (the next token), kIgnoreIndex where not counted
// (the loss mask). loss = sum over counted rows / loss_norm (default: their number).
// Backward (Backbone::backward) returns d(embeddings) for caller rows and accumulates
// the embedding table's gradient from the token rows.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

// The id of a caller row in the mixed path: outside every vocabulary shard, so the
// embedding lookup gives zeros there and its backward skips it.
inline constexpr int32_t kVisualRowId = -1;

// One packed micro-batch (device tensors on the backbone's backend).
struct LmInput {
  Tensor ids;          // [T] i32 token ids (token and mixed paths), or undefined
  Tensor embeddings;   // [T,C] (embeddings path) or [Tv,C] (mixed) f32, replicated over TP
  Tensor visual_rows;  // [Tv] i32 rows taking caller embeddings (mixed path), or undefined
  Tensor cu_seqlens;   // [B+1] i32
  Tensor positions;    // [T] i32
  Tensor targets;      // [T] i32, kIgnoreIndex where not counted; undefined = no loss
  int max_seqlen = 0;  // longest sample
  int64_t n_tokens = 0;        // T
  int64_t n_visual = 0;        // Tv (mixed path)
  double loss_norm = 0.0;      // divisor of the summed loss (0 = number of counted targets)
  int64_t n_counted = 0;       // counted targets (set by the builders)
  int32_t max_id = -1;         // largest token id / counted target (checked against the vocabulary)

  bool mixed() const { return visual_rows.defined(); }
};

// Builds an LmInput on backend `b` from host vectors: positions restart per sample;
// validates cu_seqlens against T and the targets' range (UserError). `ids` or
// `embeddings` (a device tensor [T,C]) must be given; `targets` may be empty (no loss).
LmInput make_lm_input(Backend& b, const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& ids,
                      const std::vector<int32_t>& targets, const Tensor& embeddings = Tensor{});

// One sample of a vision-language micro-batch: n_visual caller rows (the projected
// visual tokens of its image), then the prompt's and the caption's token ids.
struct VlmSample {
  int32_t n_visual = 0;
  std::vector<int32_t> prompt, caption;
};

// Packs `samples` into one mixed-path micro-batch, rows [visual | prompt | caption] per
// sample. `visual` [sum n_visual, C] (a device tensor; undefined when no sample has
// visual rows) holds the visual rows of the samples in order. Targets: row t predicts
// the id of row t+1 when that row is a caption token (the last visual or prompt row
// predicts the first caption token), kIgnoreIndex otherwise: the loss counts caption
// tokens only. UserError for an empty sample, n_visual < 0, a negative id, or `visual`
// of the wrong row count. With sequence parallelism the caller pads so that T is a
// multiple of tp (e.g. a text-only padding sample whose caption is empty).
LmInput make_vlm_input(Backend& b, const std::vector<VlmSample>& samples, const Tensor& visual);

// Planned storage of the packing above for micro-batches of at most max_tokens rows and
// max_samples samples: device buffers and host staging, both sized once at construction,
// so that packing into them allocates nothing (the VLM's training step, train/step.h).
// The LmInput it gives views these buffers: valid until the next packing into them.
// The copies to the device are in the order of the stream given (copy_from_host): the
// caller orders the buffers' previous readers before it (train/step.h).
class LmInputBuffers {
 public:
  LmInputBuffers(Backend& b, int64_t max_tokens, int64_t max_samples);
  // make_vlm_input's packing of `samples`, then `pad_rows` > 0 rows of a text-only
  // padding sample (token 0, nothing counted; sequence parallelism pads T to a multiple
  // of tp with it).
  LmInput pack(Stream& s, std::span<const VlmSample> samples, const Tensor& visual, int64_t pad_rows = 0);
  size_t bytes() const;  // the device buffers

 private:
  int64_t max_tokens_, max_samples_;
  Tensor ids_, rows_, cu_, pos_, targets_;                   // device: [max_tokens] x4 (cu: [max_samples+2])
  std::vector<int32_t> h_ids_, h_rows_, h_cu_, h_pos_, h_targets_;  // host staging, reserved
};

}  // namespace vlm

// ModelConfig: the shape and options of the language backbone, declared once under
// `model.*` (model_options()) and read into a plain struct; block() maps it onto nn/'s
// BlockConfig, whose local(tp) gives the TP-local dimensions (computed in one place).
//
// Families:
//   gpt2  : LayerNorm (with bias), GELU MLP, learned positions, biases on every linear,
//           tied embeddings by default.
//   llama : RMSNorm, SwiGLU MLP, RoPE (HF rotate-half), grouped-query attention,
//           optional QKV bias (Qwen2), no other biases, untied output layer by default.
// Invariants after validate(tp): d_model = n_heads * head_dim, head_dim even for RoPE,
// n_heads % n_kv_heads == 0, n_heads % tp == 0, d_ff % tp == 0, and either
// n_kv_heads % tp == 0 (KV heads split) or tp % n_kv_heads == 0 (KV heads replicated).
// The vocabulary is padded to a multiple of 128 * tp (padded_vocab); padded logits are
// masked out of the loss, so the model does not depend on the padding.
#pragma once
#include <cstdint>
#include <string>

#include "base/options.h"
#include "nn/block_config.h"

namespace vlm {

enum class ModelFamily { GPT2, Llama };

// The largest backbone the options and ModelConfig::validate accept (every tensor's
// element count then fits int64 many times over; the largest real models are far below).
inline constexpr int64_t kMaxVocab = int64_t(1) << 24;      // V
inline constexpr int64_t kMaxWidth = int64_t(1) << 18;      // C and the MLP width
inline constexpr int kMaxLayers = 4096;                      // L
inline constexpr int kMaxHeads = 4096;                       // NH, NKV
inline constexpr int64_t kMaxPositions = int64_t(1) << 24;  // max_pos

struct ModelConfig {
  ModelFamily family = ModelFamily::GPT2;
  int64_t vocab_size = 50257;  // V (unpadded, as in the tokenizer / HF config)
  int64_t d_model = 768;       // C
  int n_layers = 12;           // L
  int n_heads = 12;            // NH
  int n_kv_heads = 0;          // NKV (0 = n_heads)
  int64_t d_ff = 3072;         // MLP hidden width
  int64_t max_pos = 1024;      // the longest sample (gpt2: its learned position table's rows)
  float rope_theta = 10000.f;  // llama
  float norm_eps = 1e-5f;
  bool qkv_bias = false;       // llama: bias on q/k/v (Qwen2); gpt2 always has biases
  bool tied_embeddings = true; // lm_head shares model.embed_tokens.weight
  Recompute recompute = Recompute::None;
  bool sequence_parallel = false;
  float init_std = 0.02f;      // normal init std; residual projections use std/sqrt(2L)
  int64_t loss_chunk = 0;      // tokens per chunk of the output head and loss (0 = auto: llm/loss_parallel.h)

  int kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  int64_t head_dim() const { return d_model / n_heads; }  // HS
  bool is_llama() const { return family == ModelFamily::Llama; }
  bool has_linear_bias() const { return family == ModelFamily::GPT2; }
  bool has_qkv_bias() const { return family == ModelFamily::GPT2 || qkv_bias; }
  // Vocabulary rounded up to a multiple of 128 * tp (rows of the embedding table).
  int64_t padded_vocab(int tp) const;
  // Vocabulary rows (= logit columns) of one rank: padded_vocab(tp) / tp.
  int64_t local_vocab(int tp) const { return padded_vocab(tp) / tp; }
  // The blocks of the backbone: causal; LayerNorm + GELU + biases (gpt2) or RMSNorm +
  // SwiGLU + RoPE (llama, q/k/v bias when has_qkv_bias()).
  // Their TP-local sizes: block().local(tp) (nn/block_config.h).
  BlockConfig block() const;

  // Throws UserError naming the `model.*` option when the config is invalid for `tp`.
  void validate(int tp) const;
  std::string str() const;  // one line for logs
};

const char* family_name(ModelFamily f);

// The `model.*` options, one per field above (base/options.h); model.tied_embeddings is
// a choice auto|true|false (auto = true for gpt2, false for llama).
const OptionSet<ModelConfig>& model_options();
void register_llm_options(Config& cfg);
// Reads the options registered above (does not validate: call validate(tp)).
ModelConfig read_model_config(const Config& cfg);

}  // namespace vlm

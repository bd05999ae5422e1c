// Hugging Face config.json of a Llama or Qwen2 checkpoint <-> the backbone's ModelConfig.
// Read: model_type "llama" or "qwen2"; vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default = heads), intermediate_size,
// rms_norm_eps, rope_theta (top level, or rope_parameters.rope_theta as transformers >= 5
// writes it), tie_word_embeddings (default false), max_position_embeddings. Qwen2 has
// a bias on q/k/v (qkv_bias = true); Llama has none.
// Refused with a UserError naming config.json and the key (the backbone cannot
// represent them, so importing would silently compute something else): a hidden_act
// other than silu, head_dim != hidden_size / num_attention_heads, RoPE scaling other
// than "default", Llama attention_bias/mlp_bias = true, Qwen2 use_sliding_window = true.
// Write: the inverse, for export (model_type qwen2 when qkv_bias, else llama).
#pragma once
#include <string>

#include "llm/model_config.h"

namespace vlm {

// `path` is a config.json file or a checkpoint directory holding one.
ModelConfig read_hf_config(const std::string& path);
// The config.json text of a llama-family ModelConfig (UserError for gpt2).
std::string hf_config_json(const ModelConfig& cfg);
void write_hf_config(const std::string& path, const ModelConfig& cfg);

}  // namespace vlm

// The backbone's parameter table (names, full shapes, TP split, init) for a ModelConfig
// at tensor-parallel size tp. Names follow Hugging Face Llama/Qwen2; GPT-2 uses the
// same scheme plus biases and learned positions. HF layout: Linear weight [out, in].
//
//  name                                          full shape        split    init
//  model.embed_tokens.weight                     [Vp, C]           0 (vocab) N(0,std)
//  model.embed_positions.weight        (gpt2)    [max_pos, C]      repl     N(0,std)
//  model.layers.{i}.input_layernorm.weight       [C]               repl     1
//  model.layers.{i}.input_layernorm.bias (gpt2)  [C]               repl     0
//  model.layers.{i}.self_attn.q_proj.weight      [NH*HS, C]        0        N(0,std)
//  model.layers.{i}.self_attn.k_proj.weight      [NKV*HS, C]       0 | repl (NKV < tp)
//  model.layers.{i}.self_attn.v_proj.weight      [NKV*HS, C]       0 | repl (NKV < tp)
//  model.layers.{i}.self_attn.{q,k,v}_proj.bias  [.. HS]           as weight, 0 (gpt2; llama with qkv_bias)
//  model.layers.{i}.self_attn.o_proj.weight      [C, NH*HS]        1        N(0,std/sqrt(2L))
//  model.layers.{i}.self_attn.o_proj.bias (gpt2) [C]               repl     0
//  model.layers.{i}.post_attention_layernorm.*   as input_layernorm
//  model.layers.{i}.mlp.gate_proj.weight (llama) [F, C]            0        N(0,std)
//  model.layers.{i}.mlp.up_proj.weight           [F, C]            0        N(0,std)
//  model.layers.{i}.mlp.up_proj.bias     (gpt2)  [F]               0        0
//  model.layers.{i}.mlp.down_proj.weight         [C, F]            1        N(0,std/sqrt(2L))
//  model.layers.{i}.mlp.down_proj.bias   (gpt2)  [C]               repl     0
//  model.norm.weight (+ .bias gpt2)              [C]               repl     1 (0)
//  lm_head.weight             (untied only)      [Vp, C]           0 (vocab) N(0,std)
// Vp = padded_vocab(tp); hf shape has V rows. Tied: no lm_head.weight entry (the output
// layer uses model.embed_tokens.weight; HF files may still carry a copy).
//
// The rows model.layers.{i}.* are a block's parameters (nn/block.h: shapes, split,
// init); backbone_block_param_name gives their names here.
//
// Hugging Face GPT-2 names map onto this scheme (Conv1D weights are [in, out]: transpose):
//   transformer.wte -> model.embed_tokens, transformer.wpe -> model.embed_positions,
//   h.{i}.ln_1 -> input_layernorm, h.{i}.ln_2 -> post_attention_layernorm,
//   h.{i}.attn.c_attn.weight [C,3C] -> transpose, rows [0,C) q_proj, [C,2C) k_proj,
//   [2C,3C) v_proj (bias likewise), h.{i}.attn.c_proj -> o_proj (transposed),
//   h.{i}.mlp.c_fc -> mlp.up_proj (transposed), h.{i}.mlp.c_proj -> mlp.down_proj
//   (transposed), transformer.ln_f -> model.norm.
#pragma once
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "nn/block.h"
#include "nn/param_table.h"

namespace vlm {

std::vector<ParamSpec> backbone_param_specs(const ModelConfig& cfg, int tp);
// "model.layers.{i}." + suffix
std::string layer_param_name(int layer, const std::string& suffix);
// The Hugging Face name of a block parameter: "model.layers.{i}.self_attn.q_proj.weight",
// ... (the BlockParamNames of the backbone's stack).
std::string backbone_block_param_name(int layer, BlockParam role);
// The final norm's parameter names ("model.norm.weight", "model.norm.bias").
// The token embedding table (also the output layer when tied).
inline constexpr const char* kEmbedTokens = "model.embed_tokens.weight";
inline constexpr const char* kFinalNormWeight = "model.norm.weight";
inline constexpr const char* kFinalNormBias = "model.norm.bias";

}  // namespace vlm

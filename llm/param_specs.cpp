// The backbone parameter table; see param_specs.h for the full listing.
#include "llm/param_specs.h"

#include <cmath>

namespace vlm {

std::string layer_param_name(int layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<ParamSpec> backbone_param_specs(const ModelConfig& cfg, int tp) {
  cfg.validate(tp);
  const bool sp = cfg.sequence_parallel && tp > 1;
  const int64_t C = cfg.d_model, HS = cfg.head_dim(), NH = cfg.n_heads, NKV = cfg.kv_heads(), F = cfg.d_ff;
  const int64_t V = cfg.vocab_size, Vp = cfg.padded_vocab(tp);
  const float std = cfg.init_std, std_res = cfg.init_std / std::sqrt(2.f * float(cfg.n_layers));
  const bool gpt2 = !cfg.is_llama(), kv_rep = cfg.kv_replicated(tp);
  std::vector<ParamSpec> v;
  auto add = [&](std::string name, Shape full, int split, InitKind init, float sd, bool partial, Shape hf = Shape{}) {
    ParamSpec s;
    s.name = std::move(name);
    s.full = full;
    s.hf = hf.ndim() ? hf : full;
    s.split_dim = split;
    s.init = init;
    s.std = sd;
    s.tp_partial_grad = partial;
    v.push_back(std::move(s));
  };
  auto norm = [&](const std::string& prefix) {
    add(prefix + ".weight", Shape{C}, -1, InitKind::Ones, 0.f, sp);
    if (gpt2) add(prefix + ".bias", Shape{C}, -1, InitKind::Zeros, 0.f, sp);
  };
  add("model.embed_tokens.weight", Shape{Vp, C}, 0, InitKind::Normal, std, false, Shape{V, C});
  if (gpt2) add("model.embed_positions.weight", Shape{cfg.max_pos, C}, -1, InitKind::Normal, std, sp);
  for (int i = 0; i < cfg.n_layers; ++i) {
    auto n = [&](const char* s) { return layer_param_name(i, s); };
    norm(n("input_layernorm"));
    add(n("self_attn.q_proj.weight"), Shape{NH * HS, C}, 0, InitKind::Normal, std, false);
    const int kv_split = kv_rep ? -1 : 0;
    add(n("self_attn.k_proj.weight"), Shape{NKV * HS, C}, kv_split, InitKind::Normal, std, kv_rep);
    add(n("self_attn.v_proj.weight"), Shape{NKV * HS, C}, kv_split, InitKind::Normal, std, kv_rep);
    if (cfg.has_qkv_bias()) {
      add(n("self_attn.q_proj.bias"), Shape{NH * HS}, 0, InitKind::Zeros, 0.f, false);
      add(n("self_attn.k_proj.bias"), Shape{NKV * HS}, kv_split, InitKind::Zeros, 0.f, kv_rep);
      add(n("self_attn.v_proj.bias"), Shape{NKV * HS}, kv_split, InitKind::Zeros, 0.f, kv_rep);
    }
    add(n("self_attn.o_proj.weight"), Shape{C, NH * HS}, 1, InitKind::Normal, std_res, false);
    if (gpt2) add(n("self_attn.o_proj.bias"), Shape{C}, -1, InitKind::Zeros, 0.f, sp);
    norm(n("post_attention_layernorm"));
    if (!gpt2) add(n("mlp.gate_proj.weight"), Shape{F, C}, 0, InitKind::Normal, std, false);
    add(n("mlp.up_proj.weight"), Shape{F, C}, 0, InitKind::Normal, std, false);
    if (gpt2) add(n("mlp.up_proj.bias"), Shape{F}, 0, InitKind::Zeros, 0.f, false);
    add(n("mlp.down_proj.weight"), Shape{C, F}, 1, InitKind::Normal, std_res, false);
    if (gpt2) add(n("mlp.down_proj.bias"), Shape{C}, -1, InitKind::Zeros, 0.f, sp);
  }
  norm("model.norm");
  if (!cfg.tied_embeddings) add("lm_head.weight", Shape{Vp, C}, 0, InitKind::Normal, std, false, Shape{V, C});
  return v;
}

}  // namespace vlm

// The backbone parameter table; see param_specs.h for the full listing.
#include "llm/param_specs.h"

#include "base/error.h"
#include "nn/norm.h"
#include "nn/stack.h"

namespace vlm {

std::string layer_param_name(int layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::string backbone_block_param_name(int layer, BlockParam role) {
  const char* s = "";
  switch (role) {
    case BlockParam::Norm1Weight: s = "input_layernorm.weight"; break;
    case BlockParam::Norm1Bias: s = "input_layernorm.bias"; break;
    case BlockParam::QWeight: s = "self_attn.q_proj.weight"; break;
    case BlockParam::KWeight: s = "self_attn.k_proj.weight"; break;
    case BlockParam::VWeight: s = "self_attn.v_proj.weight"; break;
    case BlockParam::QBias: s = "self_attn.q_proj.bias"; break;
    case BlockParam::KBias: s = "self_attn.k_proj.bias"; break;
    case BlockParam::VBias: s = "self_attn.v_proj.bias"; break;
    case BlockParam::OWeight: s = "self_attn.o_proj.weight"; break;
    case BlockParam::OBias: s = "self_attn.o_proj.bias"; break;
    case BlockParam::Norm2Weight: s = "post_attention_layernorm.weight"; break;
    case BlockParam::Norm2Bias: s = "post_attention_layernorm.bias"; break;
    case BlockParam::GateWeight: s = "mlp.gate_proj.weight"; break;
    case BlockParam::GateBias: s = "mlp.gate_proj.bias"; break;
    case BlockParam::UpWeight: s = "mlp.up_proj.weight"; break;
    case BlockParam::UpBias: s = "mlp.up_proj.bias"; break;
    case BlockParam::DownWeight: s = "mlp.down_proj.weight"; break;
    case BlockParam::DownBias: s = "mlp.down_proj.bias"; break;
  }
  return layer_param_name(layer, s);
}

std::vector<ParamSpec> backbone_param_specs(const ModelConfig& cfg, int tp) {
  cfg.validate(tp);
  const BlockConfig bc = cfg.block();
  const bool sp = bc.seq_parallel(tp), gpt2 = !cfg.is_llama();
  const int64_t C = cfg.d_model, V = cfg.vocab_size, Vp = cfg.padded_vocab(tp);
  std::vector<ParamSpec> v;
  auto vocab_table = [&](const char* name, bool lookups) {
    ParamSpec s = param_spec(name, Shape{Vp, C}, 0, InitKind::Normal, cfg.init_std);
    s.hf = Shape{V, C};
    s.f32_reads = lookups;  // the embedding's (and the prompt query's) lookups read f32 rows
    v.push_back(std::move(s));
  };
  vocab_table(kEmbedTokens, true);
  if (gpt2) {
    v.push_back(param_spec("model.embed_positions.weight", Shape{cfg.max_pos, C}, -1, InitKind::Normal,
                           cfg.init_std, sp));
    v.back().f32_reads = true, v.back().no_decay = true;
  }
  for (ParamSpec& s : stack_param_specs(bc, cfg.n_layers, tp, cfg.init_std, backbone_block_param_name))
    v.push_back(std::move(s));
  for (ParamSpec& s : Norm::param_specs(bc.norm, C, kFinalNormWeight, kFinalNormBias, sp)) v.push_back(std::move(s));
  if (!cfg.tied_embeddings) vocab_table("lm_head.weight", false);
  return v;
}

}  // namespace vlm

// ModelConfig options (`model.*`) and validation; see model_config.h.
#include "llm/model_config.h"

#include "base/config.h"
#include "base/error.h"

namespace vlm {

const char* family_name(ModelFamily f) { return f == ModelFamily::GPT2 ? "gpt2" : "llama"; }

int64_t ModelConfig::padded_vocab(int tp) const {
  const int64_t m = 128 * int64_t(tp);
  return (vocab_size + m - 1) / m * m;
}

BlockConfig ModelConfig::block() const {
  BlockConfig b;
  b.C = d_model;
  b.n_heads = n_heads;
  b.n_kv_heads = kv_heads();
  b.head_dim = head_dim();
  b.d_ff = d_ff;
  b.norm = is_llama() ? NormKind::RMSNorm : NormKind::LayerNorm;
  b.norm_eps = norm_eps;
  b.mlp = is_llama() ? MlpKind::SwiGLU : MlpKind::GeluTanh;
  b.qkv_bias = has_qkv_bias();
  b.linear_bias = has_linear_bias();
  b.rope = is_llama();
  b.rope_theta = rope_theta;
  b.causal = true;
  b.recompute = recompute;
  b.sequence_parallel = sequence_parallel;
  return b;
}

void ModelConfig::validate(int tp) const {
  VLM_REQUIRE(tp >= 1, "parallel.tp: expected >= 1, got ", tp);
  VLM_REQUIRE(vocab_size > 0, "model.vocab_size: expected > 0, got ", vocab_size);
  VLM_REQUIRE(n_layers > 0, "model.n_layers: expected > 0, got ", n_layers);
  VLM_REQUIRE(n_heads > 0, "model.n_heads: expected > 0, got ", n_heads);
  VLM_REQUIRE(d_model > 0 && d_model % n_heads == 0, "model.d_model: expected a positive multiple of ",
              "model.n_heads=", n_heads, ", got ", d_model);
  VLM_REQUIRE(d_ff > 0, "model.d_ff: expected > 0, got ", d_ff);
  VLM_REQUIRE(max_pos > 0, "model.max_pos: expected > 0, got ", max_pos);
  VLM_REQUIRE(norm_eps > 0, "model.norm_eps: expected > 0, got ", norm_eps);
  const int nkv = kv_heads();
  VLM_REQUIRE(nkv > 0 && n_heads % nkv == 0, "model.n_kv_heads: expected a divisor of model.n_heads=",
              n_heads, ", got ", n_kv_heads);
  VLM_REQUIRE(family == ModelFamily::Llama || nkv == n_heads,
              "model.n_kv_heads: grouped-query attention needs model.family=llama (gpt2 has n_kv_heads = n_heads)");
  if (is_llama())
    VLM_REQUIRE(head_dim() % 2 == 0, "model.d_model / model.n_heads: RoPE needs an even head size, got ",
                head_dim());
  VLM_REQUIRE(n_heads % tp == 0, "model.n_heads=", n_heads, " is not divisible by parallel.tp=", tp);
  VLM_REQUIRE(nkv % tp == 0 || tp % nkv == 0, "model.n_kv_heads=", nkv,
              ": expected a multiple or a divisor of parallel.tp=", tp);
  VLM_REQUIRE(d_ff % tp == 0, "model.d_ff=", d_ff, " is not divisible by parallel.tp=", tp);
}

std::string ModelConfig::str() const {
  return cat(family_name(family), " V=", vocab_size, " C=", d_model, " L=", n_layers, " NH=", n_heads,
             " NKV=", kv_heads(), " F=", d_ff, " max_pos=", max_pos, is_llama() ? cat(" rope_theta=", rope_theta) : "",
             " eps=", norm_eps, has_qkv_bias() ? " qkv_bias" : "", tied_embeddings ? " tied" : " untied",
             " recompute=", recompute_name(recompute), sequence_parallel ? " sp" : "");
}

void register_llm_options(Config& cfg) {
  cfg.add_choice("model.family", "gpt2", {"gpt2", "llama"},
                 "backbone family: gpt2 (LayerNorm, GELU, learned positions) or llama (RMSNorm, SwiGLU, RoPE, GQA)");
  cfg.add_int("model.vocab_size", 50257, "vocabulary size V (unpadded)", 1);
  cfg.add_int("model.d_model", 768, "model width C", 1);
  cfg.add_int("model.n_layers", 12, "number of transformer blocks L", 1);
  cfg.add_int("model.n_heads", 12, "attention heads NH", 1);
  cfg.add_int("model.n_kv_heads", 0, "key/value heads NKV for grouped-query attention (0 = n_heads)", 0);
  cfg.add_int("model.d_ff", 3072, "MLP hidden width", 1);
  cfg.add_int("model.max_pos", 1024, "maximum positions (learned position table rows for gpt2)", 1);
  cfg.add_float("model.rope_theta", 10000.0, "RoPE base (llama)", 1e-6);
  cfg.add_float("model.norm_eps", 1e-5, "epsilon of LayerNorm/RMSNorm", 1e-12, 1.0);
  cfg.add_flag("model.qkv_bias", false, "bias on the q/k/v projections (llama family; Qwen2 has it)");
  cfg.add_choice("model.tied_embeddings", "auto", {"auto", "true", "false"},
                 "share the output layer with the token embedding (auto: gpt2 yes, llama no)");
  cfg.add_choice("model.recompute", "none", {"none", "selective", "full"},
                 "activation recomputation: none, selective (attention core) or full (per block)");
  cfg.add_flag("model.sequence_parallel", false,
               "sequence parallelism: norms and residuals on sequence shards of the TP group");
  cfg.add_float("model.init_std", 0.02, "std of the normal initialisation of weights", 0.0, 10.0);
  cfg.add_int("model.loss_chunk", 0,
              "tokens per chunk of the output head and loss, whose logits are never all in memory at once "
              "(0 = auto: the whole micro-batch unless its logits exceed 256 MiB per rank)",
              0);
}

ModelConfig read_model_config(const Config& cfg) {
  ModelConfig m;
  m.family = cfg.get_string("model.family") == "llama" ? ModelFamily::Llama : ModelFamily::GPT2;
  m.vocab_size = cfg.get_int("model.vocab_size");
  m.d_model = cfg.get_int("model.d_model");
  m.n_layers = int(cfg.get_int("model.n_layers"));
  m.n_heads = int(cfg.get_int("model.n_heads"));
  m.n_kv_heads = int(cfg.get_int("model.n_kv_heads"));
  m.d_ff = cfg.get_int("model.d_ff");
  m.max_pos = cfg.get_int("model.max_pos");
  m.rope_theta = float(cfg.get_float("model.rope_theta"));
  m.norm_eps = float(cfg.get_float("model.norm_eps"));
  m.qkv_bias = cfg.get_flag("model.qkv_bias");
  const std::string& tied = cfg.get_string("model.tied_embeddings");
  m.tied_embeddings = tied == "auto" ? m.family == ModelFamily::GPT2 : tied == "true";
  const std::string& rc = cfg.get_string("model.recompute");
  m.recompute = rc == "full" ? Recompute::Full : rc == "selective" ? Recompute::Selective : Recompute::None;
  m.sequence_parallel = cfg.get_flag("model.sequence_parallel");
  m.init_std = float(cfg.get_float("model.init_std"));
  m.loss_chunk = cfg.get_int("model.loss_chunk");
  return m;
}

}  // namespace vlm

// ModelConfig options (`model.*`) and validation; see model_config.h.
#include "llm/model_config.h"

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
  VLM_REQUIRE(vocab_size > 0 && vocab_size <= kMaxVocab, "model.vocab_size: expected [1, ", kMaxVocab, "], got ",
              vocab_size);
  VLM_REQUIRE(n_layers > 0 && n_layers <= kMaxLayers, "model.n_layers: expected [1, ", kMaxLayers, "], got ", n_layers);
  VLM_REQUIRE(n_heads > 0 && n_heads <= kMaxHeads, "model.n_heads: expected [1, ", kMaxHeads, "], got ", n_heads);
  VLM_REQUIRE(d_model > 0 && d_model <= kMaxWidth && d_model % n_heads == 0, "model.d_model: expected a multiple of ",
              "model.n_heads=", n_heads, " in [1, ", kMaxWidth, "], got ", d_model);
  VLM_REQUIRE(d_ff > 0 && d_ff <= kMaxWidth, "model.d_ff: expected [1, ", kMaxWidth, "], got ", d_ff);
  VLM_REQUIRE(max_pos > 0 && max_pos <= kMaxPositions, "model.max_pos: expected [1, ", kMaxPositions, "], got ",
              max_pos);
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

const OptionSet<ModelConfig>& model_options() {
  static const OptionSet<ModelConfig> set([](OptionSet<ModelConfig>& s) {
    s.option("model.family", &ModelConfig::family,
             "backbone family: gpt2 (LayerNorm, GELU, learned positions) or llama (RMSNorm, SwiGLU, RoPE, GQA)")
        .choices(choices_of(family_name, {ModelFamily::GPT2, ModelFamily::Llama}));
    s.option("model.vocab_size", &ModelConfig::vocab_size, "vocabulary size V (unpadded)").range(1, kMaxVocab);
    s.option("model.d_model", &ModelConfig::d_model, "model width C").range(1, kMaxWidth);
    s.option("model.n_layers", &ModelConfig::n_layers, "number of transformer blocks L").range(1, kMaxLayers);
    s.option("model.n_heads", &ModelConfig::n_heads, "attention heads NH").range(1, kMaxHeads);
    s.option("model.n_kv_heads", &ModelConfig::n_kv_heads,
             "key/value heads NKV for grouped-query attention (0 = n_heads)")
        .range(0, kMaxHeads);
    s.option("model.d_ff", &ModelConfig::d_ff, "MLP hidden width").range(1, kMaxWidth);
    s.option("model.max_pos", &ModelConfig::max_pos,
             "the longest sample in tokens (gpt2: its learned position table's rows; llama: max_position_embeddings)")
        .range(1, kMaxPositions);
    s.option("model.rope_theta", &ModelConfig::rope_theta, "RoPE base (llama)").at_least(1e-6);
    s.option("model.norm_eps", &ModelConfig::norm_eps, "epsilon of LayerNorm/RMSNorm").range(1e-12, 1.0);
    s.option("model.qkv_bias", &ModelConfig::qkv_bias, "bias on the q/k/v projections (llama family; Qwen2 has it)");
    s.option("model.tied_embeddings", &ModelConfig::tied_embeddings,
             "share the output layer with the token embedding (auto: gpt2 yes, llama no)")
        .parse("auto", [](const std::string& v, const ModelConfig& m) {
          return v == "auto" ? m.family == ModelFamily::GPT2 : v == "true";
        })
        .one_of({"auto", "true", "false"});
    s.option("model.recompute", &ModelConfig::recompute,
             "activation recomputation: none, selective (attention core) or full (per block)")
        .choices(choices_of(recompute_name, {Recompute::None, Recompute::Selective, Recompute::Full}));
    s.option("model.sequence_parallel", &ModelConfig::sequence_parallel,
             "sequence parallelism: norms and residuals on sequence shards of the TP group");
    s.option("model.init_std", &ModelConfig::init_std, "std of the normal initialisation of weights").range(0.0, 10.0);
    s.option("model.loss_chunk", &ModelConfig::loss_chunk,
             "tokens per chunk of the output head and loss, whose logits are never all in memory at once "
             "(0 = auto: the whole micro-batch unless its logits exceed 256 MiB per rank)")
        .at_least(0);
  });
  return set;
}

void register_llm_options(Config& cfg) { model_options().add_to(cfg); }
ModelConfig read_model_config(const Config& cfg) { return model_options().read(cfg); }

}  // namespace vlm

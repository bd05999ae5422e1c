// Hugging Face Llama/Qwen2 config.json <-> ModelConfig; see hf_config.h for the keys
// read and the features refused.
#include "llm/hf_config.h"

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/json.h"
#include "io/atomic_file.h"

namespace vlm {

namespace {

// Typed getters that name the file and key in errors.
struct Reader {
  const json::Value& root;
  std::string file;

  std::string what(const char* key) const { return cat(file, ": ", key); }
  bool has(const char* key) const { const auto* v = root.find(key); return v && !v->is_null(); }
  // Sizes lie in [1, hi] (json::int_in: "<file>: key=value: expected an integer in
  // [1, hi]"); the bounds keep every product of sizes inside int64.
  int64_t get_int(const char* key, int64_t hi) const { return json::int_in(root.at(key, file), 1, hi, what(key)); }
  int64_t get_int_or(const char* key, int64_t def, int64_t hi) const { return has(key) ? get_int(key, hi) : def; }
  double get_double_or(const char* key, double def, double lo, double hi) const {
    return has(key) ? json::double_in(root.at(key), lo, hi, what(key)) : def;
  }
  bool get_bool_or(const char* key, bool def) const { return has(key) ? root.at(key).as_bool(what(key)) : def; }
  std::string get_string_or(const char* key, const std::string& def) const {
    return has(key) ? root.at(key).as_string(what(key)) : def;
  }
};

// RoPE bases in use run from 1e4 to 1e7; these bounds keep the f32 value finite and exact enough.
constexpr double kMinTheta = 1.0, kMaxTheta = 1e12;

double rope_theta_of(const Reader& r) {
  // transformers >= 5: "rope_parameters": {"rope_type": "default", "rope_theta": ...};
  // older files: top-level "rope_theta" and an optional "rope_scaling" object.
  double theta = r.get_double_or("rope_theta", 10000.0, kMinTheta, kMaxTheta);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.has(key)) continue;
    const json::Value& p = r.root.at(key);
    const std::string w = r.what(key);
    p.as_object(w);
    std::string type = "default";
    if (const auto* t = p.find("rope_type")) type = t->as_string(cat(w, ".rope_type"));
    else if (const auto* t2 = p.find("type")) type = t2->as_string(cat(w, ".type"));
    VLM_REQUIRE(type == "default", w, ": RoPE type '", type,
                "' is not supported (only the default, unscaled RoPE)");
    if (const auto* t = p.find("rope_theta")) theta = json::double_in(*t, kMinTheta, kMaxTheta, cat(w, ".rope_theta"));
  }
  return theta;
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  VLM_REQUIRE(fs::exists(file), file, ": not found (expected a Hugging Face config.json)");
  json::Value root = json::parse_file(file);
  root.as_object(file);
  Reader r{root, file};

  const std::string type = root.at("model_type", file).as_string(r.what("model_type"));
  VLM_REQUIRE(type == "llama" || type == "qwen2", r.what("model_type"), ": '", type,
              "' is not supported (expected llama or qwen2)");
  const std::string act = r.get_string_or("hidden_act", "silu");
  VLM_REQUIRE(act == "silu", r.what("hidden_act"), ": '", act, "' is not supported (expected silu)");

  ModelConfig m;
  m.family = ModelFamily::Llama;
  // The backbone's limits (llm/model_config.h), in the file's keys.
  m.vocab_size = r.get_int("vocab_size", kMaxVocab);
  m.d_model = r.get_int("hidden_size", kMaxWidth);
  m.n_layers = int(r.get_int("num_hidden_layers", kMaxLayers));
  m.n_heads = int(r.get_int("num_attention_heads", kMaxHeads));
  m.n_kv_heads = int(r.get_int_or("num_key_value_heads", m.n_heads, kMaxHeads));
  m.d_ff = r.get_int("intermediate_size", kMaxWidth);
  m.max_pos = r.get_int_or("max_position_embeddings", 2048, kMaxPositions);
  m.norm_eps = float(r.get_double_or("rms_norm_eps", 1e-6, 1e-30, 1.0));
  m.rope_theta = float(rope_theta_of(r));
  m.tied_embeddings = r.get_bool_or("tie_word_embeddings", false);
  m.init_std = float(r.get_double_or("initializer_range", 0.02, 0.0, 1e6));
  m.qkv_bias = type == "qwen2";

  // The backbone's own rules (ModelConfig::validate) in the file's terms, so that a bad
  // checkpoint is reported by its keys, not by our option names.
  VLM_REQUIRE(m.d_model % m.n_heads == 0, r.what("hidden_size"), "=", m.d_model,
              " is not divisible by num_attention_heads=", m.n_heads);
  VLM_REQUIRE(m.n_heads % m.n_kv_heads == 0, r.what("num_key_value_heads"), "=", m.n_kv_heads,
              " must divide num_attention_heads=", m.n_heads);
  VLM_REQUIRE(m.head_dim() % 2 == 0, file, ": hidden_size / num_attention_heads = ", m.d_model, " / ", m.n_heads,
              " = ", m.head_dim(), ": RoPE needs an even head size");
  if (r.has("head_dim"))
    VLM_REQUIRE(r.get_int("head_dim", int64_t(1) << 20) == m.head_dim(), r.what("head_dim"), "=",
                r.get_int("head_dim", int64_t(1) << 20), " differs from hidden_size / num_attention_heads = ",
                m.head_dim(), " (not supported by the backbone)");
  if (type == "llama") {
    VLM_REQUIRE(!r.get_bool_or("attention_bias", false), r.what("attention_bias"),
                ": true is not supported (Llama attention without biases only)");
    VLM_REQUIRE(!r.get_bool_or("mlp_bias", false), r.what("mlp_bias"), ": true is not supported");
  } else {
    VLM_REQUIRE(!r.get_bool_or("use_sliding_window", false), r.what("use_sliding_window"),
                ": sliding-window attention is not supported");
  }
  return m;
}

std::string hf_config_json(const ModelConfig& m) {
  VLM_REQUIRE(m.is_llama(), "Hugging Face export: only the llama family (Llama/Qwen2) can be exported, got ",
              family_name(m.family));
  using json::Value;
  const bool qwen = m.qkv_bias;
  Value v = Value::object();
  v.set("architectures", Value::array({Value::string(qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM")}));
  v.set("model_type", Value::string(qwen ? "qwen2" : "llama"));
  v.set("hidden_act", Value::string("silu"));
  v.set("vocab_size", Value::integer(m.vocab_size));
  v.set("hidden_size", Value::integer(m.d_model));
  v.set("intermediate_size", Value::integer(m.d_ff));
  v.set("num_hidden_layers", Value::integer(m.n_layers));
  v.set("num_attention_heads", Value::integer(m.n_heads));
  v.set("num_key_value_heads", Value::integer(m.kv_heads()));
  v.set("head_dim", Value::integer(m.head_dim()));
  v.set("max_position_embeddings", Value::integer(m.max_pos));
  v.set("rms_norm_eps", Value::float_number(m.norm_eps));
  v.set("rope_theta", Value::float_number(m.rope_theta));
  v.set("tie_word_embeddings", Value::boolean(m.tied_embeddings));
  v.set("initializer_range", Value::float_number(m.init_std));
  if (qwen) v.set("use_sliding_window", Value::boolean(false));
  else {
    v.set("attention_bias", Value::boolean(false));
    v.set("mlp_bias", Value::boolean(false));
  }
  v.set("torch_dtype", Value::string("float32"));
  return json::write(v);
}

void write_hf_config(const std::string& path, const ModelConfig& cfg) {
  write_file_atomic(path, hf_config_json(cfg) + "\n");
}

}  // namespace vlm

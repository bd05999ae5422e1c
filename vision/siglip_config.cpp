// Hugging Face SigLIP config.json -> SiglipCheckpoint; see siglip_config.h for the
// accepted layouts, the keys read and what is refused.
#include "vision/siglip_config.h"

#include <cstdint>
#include <filesystem>
#include <limits>

#include "base/config.h"
#include "base/error.h"
#include "base/json.h"

namespace vlm {

namespace {

namespace fs = std::filesystem;

// The object holding the vision keys, with the names used in messages:
// "<file>: <section><key>", section "" (top level) or "vision_config.".
struct Section {
  const json::Value& obj;
  std::string file;
  std::string section;

  std::string name(std::string_view key) const { return cat(file, ": ", section, key); }
  // Absent and null both mean "transformers' default".
  const json::Value* find(std::string_view key) const {
    const json::Value* v = obj.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  int64_t int_or(std::string_view key, int64_t def, int64_t lo, int64_t hi) const {
    const json::Value* v = find(key);
    return v ? json::int_in(*v, lo, hi, name(key)) : def;
  }
  double double_or(std::string_view key, double def, double lo, double hi) const {
    const json::Value* v = find(key);
    return v ? json::double_in(*v, lo, hi, name(key)) : def;
  }
  std::string string_or(std::string_view key, const std::string& def) const {
    const json::Value* v = find(key);
    return v ? v->as_string(name(key)) : def;
  }
  // image_size / patch_size: an int, or [h, w] with h == w (the encoder is square).
  int side_or(std::string_view key, int def, int hi) const {
    const json::Value* v = find(key);
    if (!v) return def;
    if (!v->is_array()) return int(json::int_in(*v, 1, hi, name(key)));
    const auto& a = v->as_array();
    VLM_REQUIRE(a.size() == 2, name(key), ": expected an integer or a list [height, width], got a list of ",
                a.size());
    const int64_t h = json::int_in(a[0], 1, hi, cat(name(key), "[0]"));
    const int64_t w = json::int_in(a[1], 1, hi, cat(name(key), "[1]"));
    VLM_REQUIRE(h == w, name(key), "=[", h, ", ", w, "]: only square images and patches are supported");
    return int(h);
  }
};

VisionKeys keys_of(const Section& s) {
  auto k = [&](const char* key) { return s.section + key; };
  return {s.file + ": ",           k("image_size"),          k("patch_size"),        k("hidden_size"),
          k("num_hidden_layers"), k("num_attention_heads"), k("intermediate_size"), k("layer_norm_eps")};
}

// Reads the SiglipVisionConfig keys of `s` (defaults as in transformers).
VisionConfig read_vision_keys(const Section& s, const VisionKeys& keys) {
  VisionConfig v;  // the defaults are SigLIP-B/16's, as SiglipVisionConfig's
  const std::string act = s.string_or("hidden_act", "gelu_pytorch_tanh");
  VLM_REQUIRE(act == "gelu_pytorch_tanh" || act == "gelu_new", s.name("hidden_act"), "='", act,
              "': not supported (accepted: gelu_pytorch_tanh, gelu_new: the tanh approximation the op library "
              "computes; exact-erf gelu would silently compute something else)");
  v.activation = VisionActivation::GeluTanh;
  const int64_t channels = s.int_or("num_channels", 3, 1, std::numeric_limits<int32_t>::max());
  VLM_REQUIRE(channels == 3, s.name("num_channels"), "=", channels, ": expected 3 (RGB images)");
  v.image_size = s.side_or("image_size", 224, kMaxImageSize);
  v.patch = s.side_or("patch_size", 16, kMaxImageSize);
  v.d_model = s.int_or("hidden_size", 768, 1, kMaxVisionWidth);
  v.n_layers = int(s.int_or("num_hidden_layers", 12, 1, kMaxVisionLayers));
  v.n_heads = int(s.int_or("num_attention_heads", 12, 1, kMaxVisionHeads));
  v.d_ff = s.int_or("intermediate_size", 3072, 1, kMaxVisionFF);
  v.norm_eps = float(s.double_or("layer_norm_eps", 1e-6, 1e-30, 1.0));
  v.validate(keys);
  return v;
}

// The vision_config sub-object of a SiglipModel / LLaVA / PaliGemma config.json.
Section vision_section(const json::Value& root, const std::string& file, bool model_type_required) {
  const json::Value& vc = root.at("vision_config", file);
  vc.as_object(cat(file, ": vision_config"));
  Section s{vc, file, "vision_config."};
  const json::Value* mt = s.find("model_type");
  VLM_REQUIRE(mt || !model_type_required, s.name("model_type"),
              ": missing (expected siglip_vision_model; without it transformers builds a CLIP tower)");
  if (mt) {
    const std::string& t = mt->as_string(s.name("model_type"));
    VLM_REQUIRE(t == "siglip_vision_model", s.name("model_type"), "='", t,
                "': not supported (expected siglip_vision_model)");
  }
  return s;
}

}  // namespace

SiglipCheckpoint read_siglip_config(const std::string& path) {
  const bool is_dir = fs::is_directory(path);
  SiglipCheckpoint ck;
  ck.config_file = is_dir ? (fs::path(path) / "config.json").string() : path;
  VLM_REQUIRE(fs::is_regular_file(ck.config_file), ck.config_file,
              ": not found (expected a Hugging Face config.json)");
  const std::string& file = ck.config_file;
  const json::Value root = json::parse_file(file);
  root.as_object(file);

  ck.model_type = root.at("model_type", file).as_string(cat(file, ": model_type"));
  const std::string& type = ck.model_type;
  auto read = [&](const Section& s) {
    ck.keys = keys_of(s);
    ck.vision = read_vision_keys(s, ck.keys);
  };
  if (type == "siglip_vision_model") {
    ck.prefixes = {"vision_model.", ""};
    read(Section{root, file, ""});
  } else if (type == "siglip") {
    ck.prefixes = {"vision_model."};
    read(vision_section(root, file, false));
  } else if (type == "llava" || type == "paligemma") {
    ck.prefixes = {"vision_tower.vision_model.", "vision_tower.", "model.vision_tower.vision_model.",
                   "model.vision_tower."};
    read(vision_section(root, file, true));
  } else {
    throw UserError(cat(file, ": model_type='", type,
                        "': not supported (expected siglip_vision_model, siglip, llava or paligemma)"));
  }

  ck.feature_layers = ck.vision.n_layers;
  ck.feature_post_norm = true;
  if (type == "llava") {
    const Section top{root, file, ""};
    const int L = ck.vision.n_layers;
    const json::Value* fl = top.find("vision_feature_layer");
    VLM_REQUIRE(!fl || !fl->is_array(), top.name("vision_feature_layer"),
                ": a list of layers is not supported (expected one integer)");
    // hidden_states has L + 1 entries: 0 = embeddings, i = after block i.
    const int64_t k = fl ? json::int_in(*fl, -(L + 1), L, top.name("vision_feature_layer")) : -2;
    ck.feature_layers = int(k >= 0 ? k : L + 1 + k);
    ck.feature_post_norm = false;
  }
  ck.vision.hf_dir = is_dir ? path : fs::path(path).parent_path().string();
  return ck;
}

std::string find_tensor_prefix(const SiglipCheckpoint& ck, const std::function<bool(std::string_view)>& has_tensor,
                               std::string_view weights_file) {
  std::string tried;
  for (const auto& p : ck.prefixes) {
    const std::string name = p + "embeddings.patch_embedding.weight";
    if (has_tensor(name)) return p;
    tried += tried.empty() ? name : " or " + name;
  }
  throw UserError(cat(weights_file, ": no tensor ", tried, " (a ", ck.model_type, " checkpoint per ",
                      ck.config_file, ")"));
}

std::string siglip_config_json(const VisionConfig& c) {
  using json::Value;
  Value v = Value::object();
  v.set("architectures", Value::array({Value::string("SiglipVisionModel")}));
  v.set("model_type", Value::string("siglip_vision_model"));
  v.set("hidden_act", Value::string(activation_name(c.activation)));
  v.set("image_size", Value::integer(c.image_size));
  v.set("patch_size", Value::integer(c.patch));
  v.set("num_channels", Value::integer(3));
  v.set("hidden_size", Value::integer(c.d_model));
  v.set("num_hidden_layers", Value::integer(c.n_layers));
  v.set("num_attention_heads", Value::integer(c.n_heads));
  v.set("intermediate_size", Value::integer(c.d_ff));
  v.set("layer_norm_eps", Value::float_number(c.norm_eps));
  v.set("attention_dropout", Value::number(0.0));
  v.set("vision_use_head", Value::boolean(false));
  v.set("torch_dtype", Value::string("float32"));
  return json::write(v) + "\n";
}

std::string siglip_preprocessor_json(const VisionConfig& c) {
  using json::Value;
  auto triple = [](const std::array<float, 3>& a) {
    return Value::array({Value::float_number(a[0]), Value::float_number(a[1]), Value::float_number(a[2])});
  };
  Value v = Value::object();
  v.set("image_processor_type", Value::string("SiglipImageProcessor"));
  v.set("do_resize", Value::boolean(true));
  v.set("size", Value::object({{"height", Value::integer(c.image_size)}, {"width", Value::integer(c.image_size)}}));
  v.set("resample", Value::integer(2));  // bilinear
  v.set("do_rescale", Value::boolean(true));
  v.set("rescale_factor", Value::number(1.0 / 255.0));
  v.set("do_normalize", Value::boolean(true));
  v.set("image_mean", triple(c.image_mean));
  v.set("image_std", triple(c.image_std));
  return json::write(v) + "\n";
}

void check_options_agree(const Config& cfg, const SiglipCheckpoint& ck) {
  const VisionConfig given = read_vision_config(cfg), &v = ck.vision;
  const OptionSet<VisionConfig>& opts = vision_options();
  auto agree = [&](auto field, const std::string& key) {
    if (!opts.is_set(cfg, field)) return;
    const std::string& option = opts.name_of(field);
    VLM_REQUIRE(given.*field == v.*field, option, "=", given.*field, " disagrees with ", ck.keys.source, key, "=",
                v.*field, " (leave ", option, " unset to take the checkpoint's value)");
  };
  agree(&VisionConfig::image_size, ck.keys.image_size);
  agree(&VisionConfig::patch, ck.keys.patch);
  agree(&VisionConfig::d_model, ck.keys.d_model);
  agree(&VisionConfig::n_layers, ck.keys.n_layers);
  agree(&VisionConfig::n_heads, ck.keys.n_heads);
  agree(&VisionConfig::d_ff, ck.keys.d_ff);
}

VisionConfig resolve_vision_config(const Config& cfg) {
  VisionConfig opts = read_vision_config(cfg);
  if (opts.hf_dir.empty()) {
    opts.validate();
    return opts;
  }
  VLM_REQUIRE(fs::is_directory(opts.hf_dir), "vision.hf=", opts.hf_dir,
              ": expected a Hugging Face checkpoint directory (config.json and *.safetensors)");
  const SiglipCheckpoint ck = read_siglip_config(opts.hf_dir);
  check_options_agree(cfg, ck);
  VisionConfig v = ck.vision;  // validated by read_siglip_config
  v.texture = opts.texture;
  v.init_std = opts.init_std;
  v.conv_stem = opts.conv_stem;
  if (v.conv_stem != 0) v.validate();  // refuses the stem with a checkpoint (vision_config.h)
  return v;
}

}  // namespace vlm

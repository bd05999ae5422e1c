// Hugging Face export of a trained VLM (checkpoint/export_hf.h).
#include "checkpoint/export_hf.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/json.h"
#include "data/text/tokenizer.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "llm/hf_import.h"
#include "parallel/communicator.h"
#include "vision/patch_embed.h"
#include "vision/siglip_config.h"

namespace vlm {

namespace {

namespace fs = std::filesystem;

std::string path_in(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

void make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  VLM_REQUIRE(!ec, dir, ": cannot create the export directory (", ec.message(), ")");
}

std::string generation_config_json(const Tokenizer& tok) {
  using json::Value;
  Value v = Value::object();
  v.set("bos_token_id", Value::integer(tok.bos()));
  v.set("eos_token_id", Value::integer(tok.eos()));
  v.set("pad_token_id", Value::integer(tok.pad()));
  v.set("do_sample", Value::boolean(false));
  return json::write(v) + "\n";
}

std::string tokenizer_config_json(const Tokenizer& tok, int64_t max_len) {
  using json::Value;
  Value v = Value::object();
  v.set("tokenizer_class", Value::string("PreTrainedTokenizerFast"));
  v.set("bos_token", Value::string(tok.token_bytes(tok.bos())));
  v.set("eos_token", Value::string(tok.token_bytes(tok.eos())));
  v.set("pad_token", Value::string(tok.token_bytes(tok.pad())));
  v.set("unk_token", Value::null());  // byte-level: none (else Qwen2Tokenizer adds one past the vocabulary)
  v.set("model_max_length", Value::integer(max_len));
  v.set("add_bos_token", Value::boolean(false));
  return json::write(v) + "\n";
}

}  // namespace

void check_exportable(const VlmConfig& cfg, const std::string& checkpoint) {
  VLM_REQUIRE(cfg.llm.is_llama(), checkpoint, ": model.family=", family_name(cfg.llm.family),
              ": only the llama family (exported as Llama/Qwen2) can be exported to Hugging Face");
  VLM_REQUIRE(cfg.vision.conv_stem == 0, checkpoint, ": vision.conv_stem=", cfg.vision.conv_stem,
              ": a SigLIP tower has no convolutional stem, so this encoder cannot be exported to Hugging Face "
              "(use vlm caption / vlm eval on the checkpoint)");
}

HfExportReport export_vlm_hf(VlmModel& model, const Tokenizer& tok, const std::string& config_ini, int64_t step,
                             Communicator& tp, Communicator& self, Stream& s, const std::string& dir) {
  HfExportReport rep;
  const VlmConfig& cfg = model.config();
  // The backbone: gathered over the TP group, written by TP rank 0 (config.json + weights).
  const std::string llm_dir = path_in(dir, "llm"), vision_dir = path_in(dir, "vision");
  if (tp.rank() == 0) make_dir(llm_dir);
  export_hf_checkpoint(model.llm(), tp, s, llm_dir);
  if (tp.rank() != 0) return rep;
  rep.llm_tensors = int64_t(model.llm().params().params().size());
  write_file_atomic(path_in(llm_dir, "tokenizer.json"), tok.to_json());
  write_file_atomic(path_in(llm_dir, "tokenizer_config.json"), tokenizer_config_json(tok, cfg.llm.max_pos));
  write_file_atomic(path_in(llm_dir, "generation_config.json"), generation_config_json(tok));

  // The replicated modules: whole on every rank, nothing to gather.
  std::vector<StWriteTensor> tower, extra;
  for (StWriteTensor& t : gather_hf_params(model.vision().params(), self, s)) {
    if (t.name == kTextureWeight) {
      t.name = std::string(module_name(ModuleId::Vision)) + "/" + t.name;
      extra.push_back(std::move(t));
    } else {
      t.name = kSiglipPrefix + t.name;
      tower.push_back(std::move(t));
    }
  }
  for (const ModuleParams& m : model.modules()) {
    if (m.id != ModuleId::Projector && m.id != ModuleId::Scorers) continue;
    for (StWriteTensor& t : gather_hf_params(*m.table, self, s)) {
      t.name = std::string(module_name(m.id)) + "/" + t.name;
      extra.push_back(std::move(t));
    }
  }
  make_dir(vision_dir);
  write_safetensors(path_in(vision_dir, "model.safetensors"), tower, {{"format", "pt"}});
  write_file_atomic(path_in(vision_dir, "config.json"), siglip_config_json(cfg.vision));
  write_file_atomic(path_in(vision_dir, "preprocessor_config.json"), siglip_preprocessor_json(cfg.vision));
  rep.vision_tensors = int64_t(tower.size());

  std::sort(extra.begin(), extra.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const StWriteTensor& t : extra) rep.extra.push_back(t.name);
  write_safetensors(path_in(dir, kExtraFile), extra,
                    {{"format", "pt"},
                     {"vlm_format", "vlm-extra"},
                     {"vlm_version", "1"},
                     {"vlm_step", std::to_string(step)},
                     {"vlm_config", config_ini}});
  return rep;
}

}  // namespace vlm

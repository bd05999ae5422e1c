// Export of a trained VLM (a checkpoint loaded by load_trained_model) as Hugging Face
// files, for `vlm export` (docs/checkpoints.md, "Export to Hugging Face"). Layout of DIR:
//   llm/model.safetensors      the backbone under its own names (they are Hugging Face
//   llm/config.json            Llama/Qwen2 names, llm/param_specs.h), full unpadded
//   llm/generation_config.json tensors, f32 (llm/hf_import.h: export_hf_checkpoint);
//   llm/tokenizer.json         the run's tokenizer, with tokenizer_config.json naming
//   llm/tokenizer_config.json  its special tokens (bos, eos, pad)
//   vision/model.safetensors   the encoder's SigLIP tensors as vision_model.<name>
//   vision/config.json         (vision/siglip_import.h maps them back), a
//   vision/preprocessor_config.json  SiglipVisionModel without pooling head
//   vlm_extra.safetensors      every other parameter, named <module>/<name> as the
//                              checkpoint's /model/<module>/<name>: projector/*,
//                              scorers/*, vision/embeddings.texture_embedding.weight
//                              (when vision.texture is on); __metadata__: format "pt",
//                              vlm_format "vlm-extra", vlm_version "1", vlm_step, vlm_config
//                              (the options the run was given, as the checkpoint's /options)
// Every tensor is f32 and bitwise the checkpoint's (the model holds them in f32), so
// import(export) == checkpoint: load_hf_checkpoint(DIR/llm), load_siglip(DIR/vision)
// plus the extra file give back every parameter.
// The SigLIP tower alone (vision/) computes the encoder WITHOUT the texture map: it equals
// the VLM's encoder when vision.texture is off or the texture weights are zero; otherwise
// the VLM's features also add texture W_tex^T per cell (vision/patch_embed.h).
// Each file is written atomically (io/atomic_file.h); a failure midway can leave
// some files of DIR new and others old.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/vlm_model.h"

namespace vlm {

class Communicator;
class Stream;
class Tokenizer;

// What an export wrote (on the writing rank; zeros elsewhere).
struct HfExportReport {
  int64_t llm_tensors = 0, vision_tensors = 0;
  std::vector<std::string> extra;  // names in vlm_extra.safetensors
};

inline constexpr const char* kExtraFile = "vlm_extra.safetensors";
inline constexpr const char* kSiglipPrefix = "vision_model.";

// UserError naming model.family unless the backbone can be exported (the llama family),
// or vision.conv_stem when the encoder has a stem (no SigLIP equivalent).
void check_exportable(const VlmConfig& cfg, const std::string& checkpoint);

// Collective over `tp` (every TP rank of the model calls it): TP rank 0 writes DIR.
// `self` is a size-1 communicator (the replicated modules are not gathered).
HfExportReport export_vlm_hf(VlmModel& model, const Tokenizer& tok, const std::string& config_ini, int64_t step,
                             Communicator& tp, Communicator& self, Stream& s, const std::string& dir);

}  // namespace vlm

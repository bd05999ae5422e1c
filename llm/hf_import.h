// Hugging Face Llama/Qwen2 checkpoints <-> the backbone's parameters (docs/architecture.md, "Module contract": HF names).
//
// Import: every parameter of the ParamTable is read from the tensor of the same name
// (the table uses HF names; llm/param_specs.h). Each TP rank reads ONLY its slice:
// split_dim 0 (column-parallel weights/biases, vocabulary rows) reads rows
// [offset, offset + local) of the HF [out, in] matrix, split_dim 1 (row-parallel) the
// columns, replicated tensors are read whole. Vocabulary padding rows (>= V) are zero.
// Checked, as UserError naming the directory and tensor: every parameter present, its
// shape equal to the HF shape (ParamSpec::hf), a float dtype; and no tensor left over
// that the backbone would ignore (allowed: lm_head.weight of a tied model, rotary
// inv_freq buffers).
//
// Export: the full logical tensors (vocabulary padding dropped), gathered over the TP
// group, written by TP rank 0 as DIR/model.safetensors + DIR/config.json with the same
// names, so import(export(m)) == m bitwise at any TP (f32), and transformers can load
// the directory. Tied models write no lm_head.weight (as save_pretrained does).
#pragma once
#include <string>

#include "core/backend.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "nn/param_table.h"
#include "parallel/communicator.h"

namespace vlm {

class Backbone;

// Sets this rank's slice of every parameter in `params` (allocated) from `ckpt`.
void import_hf_params(ParamTable& params, const SafetensorsCheckpoint& ckpt, bool tied_embeddings);
// Opens DIR and imports into the backbone (whose config should come from
// read_hf_config(DIR)). Not collective: each rank reads its own slices.
void load_hf_checkpoint(Backbone& bb, const std::string& dir);

// Collective over `tp` (every rank calls it): gathers every parameter and returns the
// full HF-shaped tensors on TP rank 0 (empty on other ranks), sorted by name.
std::vector<StWriteTensor> gather_hf_params(const ParamTable& params, Communicator& tp, Stream& s,
                                            DType dtype = DType::F32);
// Collective over `tp`: writes DIR (created) as a Hugging Face checkpoint on TP rank 0.
void export_hf_checkpoint(const Backbone& bb, Communicator& tp, Stream& s, const std::string& dir,
                          DType dtype = DType::F32);

}  // namespace vlm

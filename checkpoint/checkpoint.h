// Checkpoints of `vlm train` (docs/checkpoints.md): one HDF5 file per save,
// <train.ckpt_dir>/step_<N>.h5, and a one-line text file <train.ckpt_dir>/latest naming the
// newest complete one. Layout (format "vlm-checkpoint", version 1; h5py reads every name):
//   /                          attrs format, version, step, saved_tp, saved_dp, zero,
//                              global_batch, micro_batches
//   /config                    u8 [n]: every option of the run as INI text (Config::dump_ini)
//   /options                   u8 [n]: the options the run was given (Config::dump_ini(true)),
//                              which the readers read back: an option the run left unset
//                              stays unset, so what the run derived from it is derived again
//   /tokenizer                 u8 [n]: the run's tokenizer.json
//   /model/<module>/<param>    f32 in the full logical (Hugging Face) shape, whatever the TP
//                              layout: /model/llm/model.layers.3.self_attn.q_proj.weight,
//                              /model/vision/..., /model/scorers/..., /model/projector/...
//   /optim/m/<module>/<param>, /optim/v/<module>/<param>
//                              AdamW's moments, same shapes (trainable modules only); the f32
//                              master weights are /model
//   /state                     attrs sampler_seed, sampler_epoch, sampler_step (the sampler
//                              position of the next batch), seed
// Every tensor carries an attribute crc32c (CRC-32C of its little-endian f32 bytes), so
// flipped bits in the data are refused, not trained on.
// Writing (save_checkpoint): every rank contributes its slices (TP slices of the split
// tables, ZeRO shards of the master weights and moments: nn/param_layout.h) to DP rank 0
// of TP rank 0 (world rank 0), which
// writes the file under a temporary name, flushes it to disk, renames it, then replaces
// `latest` the same way and removes the oldest files beyond train.keep_last. A process
// killed at any moment leaves the previous checkpoint and `latest` intact.
// Fault injection (tests): VLM_FAULT_CKPT_KILL=<n> makes the writer SIGKILL itself after
// the n-th tensor written.
// Reading: every rank reads each tensor whole (to check its crc32c) and keeps only its own
// slices, of any tp, dp and ZeRO level (ParamTable::write places them); no communication.
// Under ZeRO a frozen module keeps only its compute copies, which are what is saved (its
// bf16-form matrices rounded to bf16 under mixed precision: nn/param_table.h). A file that is
// not a checkpoint, is truncated or corrupt, or whose tensors' shapes differ from the
// model's is a UserError "<file>: <tensor>: ..." (exit 2).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/load/sampler.h"
#include "data/text/tokenizer.h"
#include "io/h5_io.h"
#include "model/vlm_model.h"

namespace vlm {

class AdamW;
class Communicator;
class Config;
class Runtime;

inline constexpr const char* kCheckpointFormat = "vlm-checkpoint";
inline constexpr int64_t kCheckpointVersion = 1;

// The run state that goes with the tensors.
struct CheckpointState {
  int64_t step = 0;  // optimizer steps done
  SamplerState sampler;
  uint64_t seed = 0;
  int saved_tp = 1, saved_dp = 1, zero = 0;
  int64_t global_batch = 0, micro_batches = 1;
};

// An opened, validated checkpoint file (format, version, attributes, /config, /tokenizer).
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);
  const std::string& path() const { return path_; }
  const CheckpointState& state() const { return state_; }
  const std::string& config_ini() const { return config_; }    // /config
  const std::string& options_ini() const { return options_; }  // /options
  const std::string& tokenizer_json() const { return tokenizer_; }
  // One stored tensor ("model/llm/<name>", "optim/m/vision/<name>") as a host f32 tensor,
  // which must have the shape `expect`, match its checksum and be finite (else a UserError
  // naming the file and the tensor).
  Tensor read_full(const std::string& tensor, const Shape& expect) const;
  // This rank's slice of the stored tensor of parameter `p` of table `t` (p.spec.hf shape
  // in the file; vocabulary padding rows read as 0).
  Tensor read_local(const std::string& tensor, const ParamTable& t, const Param& p) const;
  bool has(const std::string& tensor) const;
  H5Handle file() const { return file_.get(); }

 private:
  std::string path_, config_, options_, tokenizer_;
  CheckpointState state_;
  H5Id file_;
};

// `train.resume`-style resolution: a file is itself; a folder is the file its `latest`
// names (UserError when there is none). "" when `allow_missing` and the folder holds none.
std::string resolve_checkpoint(const std::string& file_or_dir, bool allow_missing = false);

// Every rank loads its slices of every module's parameters into `model` (no optimizer state).
void load_model(const CheckpointReader& ck, VlmModel& model);

// Writes <dir>/step_<state.step>.h5 (collective over the world: every rank calls it),
// then `latest`, then prunes to keep_last files (0 = keep all). Returns the path.
std::string save_checkpoint(const std::string& dir, int keep_last, const CheckpointState& state,
                            const Config& options, const Tokenizer& tok, VlmModel& model,
                            const std::vector<bool>& trainable, AdamW& opt, Runtime& rt);
// Every rank restores its parameters and optimizer moments (the optimizer of this layout).
void load_training_state(const CheckpointReader& ck, VlmModel& model, const std::vector<bool>& trainable,
                         AdamW& opt);

}  // namespace vlm

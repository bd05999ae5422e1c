// Checkpoints of `vlm train` (docs/checkpoints.md). Every save is a folder
// <train.ckpt_dir>/step_<N>/ that every rank writes in parallel (the files:
// checkpoint/shard_format.h), and the one-line file <train.ckpt_dir>/latest names the
// newest complete one. The tensors are the full logical ones (Hugging Face names and
// shapes, /model/<module>/<param>, /optim/m|v/<module>/<param>), whatever the layout;
// each rank stores the pieces of them it owns.
// Writing (save_checkpoint, collective over the world):
//  1. every rank writes the pieces its tables' layouts give it (its TP slices; of each
//     run of a table's flat space its DP block, DP rank 0 also the tail: at ZeRO >= 1
//     what it owns, nn/param_layout.h; TP-replicated parameters from TP rank 0 only:
//     checkpoint/checkpoint_pieces.h), straight from where it keeps them, each with its
//     CRC-32C, into its shard file under a temporary name, flushes it, renames it and
//     flushes the folder;
//  2. the shard headers are gathered to world rank 0, which writes the run's texts, then
//     index.json (the commit: a folder without it is no checkpoint), then `latest`, and
//     then removes the files of the folder the index does not name and the oldest saves
//     beyond train.keep_last.
// A process killed at any moment (any rank) leaves the previous save and `latest`
// whole. Fault injection (tests): VLM_FAULT_CKPT_KILL=<n>[@<rank>] makes world rank
// <rank> (every rank when omitted) SIGKILL itself at its n-th event of a save: each
// piece written is one, the shard's commit one more, and on rank 0 the index's commit
// (before `latest`) one more.
// Reading: CheckpointReader opens either form, the sharded folder or the single file
// (checkpoint/checkpoint_h5.h, what `vlm checkpoint consolidate` writes); every rank reads
// only the pieces that overlap what it holds (checkpoint/tensor_store.h), at any tp, dp
// and ZeRO stage: resharding is loading. Anything wrong is a UserError naming the file
// and the tensor (exit 2 on every rank).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "checkpoint/tensor_store.h"
#include "data/text/tokenizer.h"
#include "model/vlm_model.h"

namespace vlm {

class AdamW;
class Config;
class Runtime;

inline constexpr const char* kLatestName = "latest";

// An opened checkpoint, either form, with its state and texts read and checked.
class CheckpointReader {
 public:
  // A step_<N>/ folder (its index.json) or a step_<N>.h5 file.
  explicit CheckpointReader(const std::string& path);
  const std::string& path() const { return store_->path(); }
  bool sharded() const { return sharded_; }
  const CheckpointState& state() const { return store_->meta().state; }
  const std::string& config_ini() const { return store_->meta().config; }
  const std::string& options_ini() const { return store_->meta().options; }
  const std::string& tokenizer_json() const { return store_->meta().tokenizer; }
  TensorStore& store() const { return *store_; }
  // A whole stored tensor ("model/llm/<name>") as a host f32 tensor of shape `expect`.
  Tensor read_full(const std::string& tensor, const Shape& expect) const;
  // This rank's slice of the stored tensor of parameter p of table t, read whole.
  Tensor read_local(const std::string& tensor, const ParamTable& t, const Param& p) const;

 private:
  std::unique_ptr<TensorStore> store_;
  bool sharded_ = false;
};

// `train.resume`-style resolution: a step_<N>.h5 file or a step_<N>/ folder is itself;
// another folder is what its `latest` names (UserError when it names no complete
// checkpoint), or without a `latest` (a save killed between its index and `latest`, or
// `latest` removed) its newest complete save by step. UserError when the folder holds
// none, or "" when `allow_missing`.
std::string resolve_checkpoint(const std::string& path, bool allow_missing = false);

// The step of a save's name in a checkpoint folder: step_<N>/ or step_<N>.h5; -1 for
// any other name.
int64_t save_step(const std::string& name);

// Every rank loads its slices of every module's parameters into `model` (no optimizer state).
void load_model(const CheckpointReader& ck, VlmModel& model);
// Every rank restores the parameters and optimizer moments it holds (the optimizer of
// this layout: its DpGrads gives dp, the DP rank and the ZeRO stage).
void load_training_state(const CheckpointReader& ck, VlmModel& model, const std::vector<bool>& trainable,
                         AdamW& opt);

struct SaveReport {
  std::string path;            // the step_<N>/ folder
  int64_t total_bytes = 0;     // tensor data of every rank (the index's; on world rank 0)
  int64_t max_rank_bytes = 0;  // the most one rank wrote (on world rank 0)
  int shards = 0;
};
// Creates the checkpoint folder `dir` (train.ckpt_dir) when it is missing and checks that
// this process can write there (UserError naming --train.ckpt_dir otherwise): a run
// checks it before training, so a bad folder does not surface at the first save.
void check_checkpoint_folder(const std::string& dir);

// Writes <dir>/step_<state.step>/ (collective over the world: every rank calls it), then
// `latest`, then prunes to keep_last saves (0 = keep all) among the saves of earlier steps.
SaveReport save_checkpoint(const std::string& dir, int keep_last, const CheckpointState& state,
                           const Config& options, const Tokenizer& tok, VlmModel& model,
                           const std::vector<bool>& trainable, AdamW& opt, Runtime& rt);

}  // namespace vlm

// The options of `vlm train`, declared once under `data.*`, `train.*` and `eval.*`
// (data_options(), train_options(), eval_options(); base/options.h) and read into plain
// structs; the model's own are vision.*, lod.*, scorers.*, model.*, scheduler.*,
// parallel.*. Every rule between options is checked in check() with a UserError naming
// the options and their values:
//   train.global_batch (when set) = dp x train.micro_batches x train.batch;
//   train.steps > 0 or train.epochs > 0;
//   train.freeze: a comma list of vision, projector, scorers, llm; not all four.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "base/options.h"
#include "data/image/augment.h"
#include "model/batch.h"
#include "model/vlm_model.h"
#include "optim/optimizer.h"
#include "scheduler/streams.h"

namespace vlm {

class DatasetReader;

struct DataOptions {
  std::string path;       // the image-text HDF5 file (data/storage/schema.h)
  std::string tokenizer;  // tokenizer.json; empty = the file's /captions/tokens
  std::string prompt = "Describe the image.";  // the instruction when a sample has none
  std::string train_split = "train", val_split = "val";
  int threads = 2, prefetch = 4;
  AugmentOptions augment;  // data.flip, data.shift: the training split's batches only
  // A curriculum: the first curriculum_steps optimizer steps read the train split of
  // `curriculum` (an easier image-text file with the same tokenizer), the later ones
  // data.path's; validation and evaluation read data.path. Both set or neither.
  std::string curriculum;
  int64_t curriculum_steps = 0;
};

struct EvalOptions {
  std::string split = "test";  // caption accuracy after training ("" = none)
  int64_t images = 0;          // per DP rank; 0 = the whole split
  int pictures = 8;            // relevance pictures of the first images
  int max_new = 24;            // greedy decoding length limit
};

struct TrainOptions {
  int64_t steps = 0;
  double epochs = 0;            // used when steps = 0
  // Ends the run after this step (0: after the last), with the schedules (learning rate,
  // lod.anneal, ...) of the whole run and its checkpoint saved there unless
  // train.save_every = -1: train.resume goes on from it (ablate/ablate_prefix.h).
  int64_t stop_after = 0;
  int batch = 8;                // images per micro-batch per DP rank
  int micro_batches = 1;
  int64_t global_batch = 0;     // 0 = dp x micro_batches x batch
  int max_text = 48;            // prompt + caption tokens per sample
  OptimOptions optim;
  std::array<bool, kNumModules> frozen{};  // by ModuleId (train.freeze)
  int zero = 0;
  int log_every = 10, eval_every = 0, eval_batches = 8;
  std::string run = "run", out_dir = "runs";
  double bucket_mb = 25;
  Precision precision = Precision::FP32;  // train.precision (docs/training.md, "Numerics")
  bool grad_reduce_bf16 = false;          // train.grad_reduce_dtype=bf16 (optim/dp_grads.h)
  int64_t save_every = 0;       // checkpoints (checkpoint/checkpoint.h): every N steps and at the end; -1 never
  int keep_last = 3;
  // train.on_signal=save: SIGTERM, SIGINT or SIGUSR1 end the run after the step under
  // way, with a checkpoint there (base/stop_signal.h; docs/preemption.md).
  bool save_on_signal = true;
  // train.time_limit: minutes of steps (from this process's first) after which the run
  // saves and stops as for a signal, with exit code 3 (0 = none).
  double time_limit_min = 0;
  std::string ckpt_dir;         // resolved: <out_dir>/<run>/checkpoints when not given
  std::string resume;           // "", "auto", a file or a folder
  std::string llm_hf;           // Hugging Face backbone checkpoint (llm.hf)
  double peak_tflops = 0;       // the MFU's peak per rank; 0 = the GPU's (train/mfu.h)

  void check(int dp) const;     // the rules above
  int64_t total_steps(int64_t steps_per_epoch) const;
};

const OptionSet<DataOptions>& data_options();
const OptionSet<TrainOptions>& train_options();
const OptionSet<EvalOptions>& eval_options();
// Registers data.*, train.* (and llm.hf), eval.*, in this order.
void register_train_options(Config& cfg);
// Registers every option `vlm train` reads (model, vision, scorers, scheduler, runtime,
// data, train, eval).
void register_all_train_options(Config& cfg);
DataOptions read_data_options(const Config& cfg);
EvalOptions read_eval_options(const Config& cfg);
// train.ckpt_dir resolved: <out_dir>/<run>/checkpoints when not given.
TrainOptions read_train_options(const Config& cfg);

// The tokenizer of a run: data.tokenizer, else the file the dataset names as its
// tokenizer (UserError when there is none).
std::shared_ptr<const Tokenizer> find_tokenizer(const DataOptions& d, const DatasetReader& ds);
// The model of a run from its options (model.*, vision.*, scorers.*, lod.*; the
// config.json of llm.hf / vision.hf when set), validated for tp and the tokenizer, planned
// for train.batch images of train.max_text tokens. UserError naming the options otherwise.
VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, const Tokenizer& tok, int tp);
// The same with the tokenizer's vocabulary size only (`vlm plan`, which reads no tokenizer
// when model.vocab_size is given).
VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, int64_t tok_vocab, int tp);
// The text of every sample: BOS, data.prompt's tokens, then the caption (model/batch.h).
TextRule text_rule(const DataOptions& d, const TrainOptions& t, const Tokenizer& tok);
// "" when the instruction leaves room for a caption's word and EOS, else a note saying
// what train.max_text keeps of it (printed where a sample without a prompt gets it).
std::string instruction_cut_note(const TextRule& r);

}  // namespace vlm

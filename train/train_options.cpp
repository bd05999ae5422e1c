// The options of `vlm train` (train/train_options.h).
#include "train/train_options.h"

#include <cmath>
#include <sstream>

#include "base/error.h"
#include "base/utf8.h"
#include "data/storage/dataset.h"
#include "llm/hf_config.h"
#include "parallel/runtime.h"
#include "scheduler/options.h"
#include "scorers/placement/placement.h"
#include "vision/siglip_config.h"

namespace vlm {

namespace {

// `train.freeze`: a comma list of module names (model/vlm_model.h ModuleId).
std::array<bool, kNumModules> parse_frozen(const std::string& list) {
  std::array<bool, kNumModules> frozen{};
  std::stringstream ss(list);
  for (std::string w; std::getline(ss, w, ',');) {
    VLM_REQUIRE(!w.empty(), "--train.freeze: '", list, "' has an empty item (expected a comma list of vision, "
                "projector, scorers, llm)");
    bool found = false;
    for (int m = 0; m < kNumModules; ++m)
      if (w == module_name(ModuleId(m))) {
        VLM_REQUIRE(!frozen[size_t(m)], "--train.freeze: '", w, "' is given twice");
        frozen[size_t(m)] = found = true;
      }
    VLM_REQUIRE(found, "--train.freeze: unknown module '", w, "' (expected a comma list of vision, projector, scorers, llm)");
  }
  return frozen;
}

// eval.split: none (empty) or a split name.
std::vector<std::string> none_or_split() {
  std::vector<std::string> w{""};
  for (const std::string& n : DatasetReader::split_names()) w.push_back(n);
  return w;
}

}  // namespace

const OptionSet<DataOptions>& data_options() {
  static const OptionSet<DataOptions> set([](OptionSet<DataOptions>& s) {
    s.option("data.path", &DataOptions::path, "image-text HDF5 file to train on (vlm data build)");
    s.option("data.tokenizer", &DataOptions::tokenizer, "tokenizer.json (default: the token ids stored in the file)");
    s.option("data.prompt", &DataOptions::prompt, "instruction given to every sample that has no prompt");
    s.option("data.train_split", &DataOptions::train_split, "split to train on").one_of(DatasetReader::split_names());
    s.option("data.val_split", &DataOptions::val_split, "split of the validation loss (train.eval_every)")
        .one_of(DatasetReader::split_names());
    s.option("data.threads", &DataOptions::threads, "loader threads (decode, resize, texture)").range(1, 256);
    s.option("data.prefetch", &DataOptions::prefetch, "batches prepared ahead").range(1, 1024);
    s.option("data.flip", at(&DataOptions::augment, &AugmentOptions::flip),
             "mirror training images left-right with probability 1/2 (not for captions naming left/right)");
    s.option("data.shift", at(&DataOptions::augment, &AugmentOptions::shift),
             "shift training images by up to this many pixels per axis, filling with the background")
        .range(0, 4096);
    s.option("data.curriculum", &DataOptions::curriculum,
             "image-text HDF5 file whose train split the first data.curriculum_steps steps read, before data.path's "
             "(an easier task first, e.g. colour scenes of one item: docs/training.md, \"Curriculum\")");
    s.option("data.curriculum_steps", &DataOptions::curriculum_steps,
             "optimizer steps that read data.curriculum (0 = none)")
        .range(0, int64_t(1) << 40);
  });
  return set;
}

const OptionSet<TrainOptions>& train_options() {
  static const OptionSet<TrainOptions> set([](OptionSet<TrainOptions>& s) {
    using T = TrainOptions;
    const auto optim = [](auto field) { return at(&T::optim, field); };
    s.option("train.steps", &T::steps, "optimizer steps (0 = train.epochs)").range(0, int64_t(1) << 40);
    s.option("train.stop_after", &T::stop_after,
             "end the run after this step, saving a checkpoint there (0 = the last step); the schedules are the whole "
             "run's, so train.resume continues it as if it had not stopped")
        .range(0, int64_t(1) << 40);
    s.option("train.epochs", &T::epochs, "epochs over the train split when train.steps = 0").range(0, 1e6);
    s.option("train.batch", &T::batch, "images per micro-batch per DP rank").range(1, 1 << 20);
    s.option("train.micro_batches", &T::micro_batches, "micro-batches per optimizer step (gradient accumulation)")
        .range(1, 1 << 14);  // the step's graph and buffers grow with them: about 50 KB each
    s.option("train.global_batch", &T::global_batch,
             "images per optimizer step; must equal dp x micro_batches x batch (0 = that)")
        .range(0, int64_t(1) << 40);
    s.option("train.max_text", &T::max_text, "prompt + caption tokens per sample (longer captions are cut)")
        .range(2, 1 << 20);
    s.option("train.lr", optim(&OptimOptions::lr), "peak learning rate").range(0, 10);
    s.option("train.min_lr_ratio", optim(&OptimOptions::min_lr_ratio), "final learning rate / peak (cosine, linear)")
        .range(0, 1);
    s.option("train.warmup", optim(&OptimOptions::warmup), "linear warmup steps").range(0, int64_t(1) << 40);
    s.option("train.schedule", optim(&OptimOptions::schedule), "learning-rate decay after warmup")
        .choices(choices_of(schedule_name, {LrSchedule::Cosine, LrSchedule::Linear, LrSchedule::Constant}));
    s.option("train.weight_decay", optim(&OptimOptions::weight_decay),
             "AdamW weight decay (matrices only, optim/optimizer.h)")
        .range(0, 10);
    s.option("train.beta1", optim(&OptimOptions::beta1), "AdamW beta1").range(0, 1);
    s.option("train.beta2", optim(&OptimOptions::beta2), "AdamW beta2").range(0, 1);
    s.option("train.eps", optim(&OptimOptions::eps), "AdamW epsilon").range(0, 1);
    s.option("train.clip", optim(&OptimOptions::clip), "max global gradient norm (0 = no clipping)").range(0, 1e30);
    s.option("train.freeze", &T::frozen, "modules not trained: comma list of vision,projector,scorers,llm")
        .parse("", parse_frozen);
    s.option("train.zero", &T::zero,
             "ZeRO stage over DP (docs/training.md): 0 none; 1 f32 master weights and AdamW moments sharded "
             "(distributed optimizer); 2 also the gradients, reduce-scattered per layer; 3 also the parameters "
             "(FSDP: each layer gathered before use)")
        .range(0, 3);
    s.option("train.log_every", &T::log_every, "progress line every N steps").range(1, int64_t(1) << 40);
    s.option("train.eval_every", &T::eval_every, "validation loss every N steps (0 = at the end only)")
        .range(0, int64_t(1) << 40);
    s.option("train.eval_batches", &T::eval_batches, "batches of the validation loss").range(1, 1 << 20);
    s.option("train.run", &T::run, "run name: outputs go to <train.out_dir>/<train.run>/");
    s.option("train.out_dir", &T::out_dir, "folder of the runs");
    s.option("train.save_every", &T::save_every,
             "checkpoint every N steps and at the end (0 = at the end only, -1 = never; docs/checkpoints.md)")
        .range(-1, int64_t(1) << 40);
    s.option("train.on_signal", &T::save_on_signal,
             "SIGTERM, SIGINT or SIGUSR1 (a cluster's notice; under mpirun send SIGUSR1 to mpirun): save = every "
             "rank ends after the step under way, saves a checkpoint there (unless train.save_every = -1) and exits "
             "with 128 + the signal's number, a second signal ends at once; exit = the signal ends the process "
             "(docs/preemption.md)")
        .choices({{"save", true}, {"exit", false}});
    s.option("train.time_limit", &T::time_limit_min,
             "minutes of training steps (from this process's first step) after which every rank ends after the step "
             "under way, saves a checkpoint there (unless train.save_every = -1) and exits with code 3, for "
             "train.resume to go on; set it a step and a save short of a scheduler's limit (0 = none; "
             "docs/preemption.md)")
        .range(0, 1e9);
    s.option("train.keep_last", &T::keep_last, "saves kept in train.ckpt_dir (0 = all)").range(0, 1 << 20);
    s.option("train.ckpt_dir", &T::ckpt_dir, "checkpoint folder (empty = <train.out_dir>/<train.run>/checkpoints)");
    s.option("train.resume", &T::resume,
             "resume from a checkpoint: auto (the save `latest` names in train.ckpt_dir, else its newest complete "
             "save, when there is one), a step_N folder, a step_N.h5 file or a checkpoint folder; empty = start "
             "afresh");
    s.option("train.bucket_mb", &T::bucket_mb, "DP gradient bucket size in MiB").range(0.001, 1 << 20);
    s.option("train.precision", &T::precision,
             "arithmetic: fp32, or bf16 mixed precision (bf16 weight copies and activations, f32 master "
             "weights, gradients and statistics; docs/training.md)")
        .choices({{"fp32", Precision::FP32}, {"bf16", Precision::BF16}});
    s.option("train.grad_reduce_dtype", &T::grad_reduce_bf16,
             "dtype of the DP gradient buckets on the wire (bf16 halves the traffic; the sums land in f32)")
        .choices({{"fp32", false}, {"bf16", true}});
    s.option("train.peak_tflops", &T::peak_tflops,
             "peak TFLOP/s per rank of the MFU in the progress line (0 = the GPU's dense peak at train.precision "
             "for an H100, H200 or A100; on the CPU or another GPU no MFU unless set)")
        .range(0, 1e9);
    s.option("llm.hf", &T::llm_hf, "Hugging Face Llama/Qwen2/GPT-2 checkpoint directory for the backbone");
  });
  return set;
}

const OptionSet<EvalOptions>& eval_options() {
  static const OptionSet<EvalOptions> set([](OptionSet<EvalOptions>& s) {
    s.option("eval.split", &EvalOptions::split, "split of the caption accuracy after training (empty = none)")
        .one_of(none_or_split());
    s.option("eval.images", &EvalOptions::images, "images of the caption accuracy per DP rank (0 = the whole split)")
        .range(0, int64_t(1) << 40);
    s.option("eval.pictures", &EvalOptions::pictures, "relevance pictures written after training").range(0, 4096);
    s.option("eval.max_new", &EvalOptions::max_new, "greedy decoding: tokens generated at most").range(1, 4096);
  });
  return set;
}

void register_train_options(Config& cfg) {
  data_options().add_to(cfg);
  train_options().add_to(cfg);
  eval_options().add_to(cfg);
}

DataOptions read_data_options(const Config& cfg) {
  DataOptions d = data_options().read(cfg);
  require_utf8(d.prompt, "--" + data_options().name_of(&DataOptions::prompt));
  return d;
}
EvalOptions read_eval_options(const Config& cfg) { return eval_options().read(cfg); }

TrainOptions read_train_options(const Config& cfg) {
  TrainOptions t = train_options().read(cfg);
  if (t.ckpt_dir.empty()) t.ckpt_dir = t.out_dir + "/" + t.run + "/checkpoints";
  return t;
}

void TrainOptions::check(int dp) const {
  const int64_t derived = int64_t(dp) * micro_batches * batch;
  VLM_REQUIRE(global_batch == 0 || global_batch == derived, "--train.global_batch=", global_batch,
              " must equal dp x train.micro_batches x train.batch = ", dp, " x ", micro_batches, " x ", batch, " = ",
              derived);
  VLM_REQUIRE(steps > 0 || epochs > 0, "--train.steps or --train.epochs: one must be positive");
  // AdamW divides by 1 - beta^t (bias correction) and by sqrt(v) + eps.
  VLM_REQUIRE(optim.beta1 < 1, "--train.beta1: ", optim.beta1, " (expected below 1: AdamW divides by 1 - beta1^t)");
  VLM_REQUIRE(optim.beta2 < 1, "--train.beta2: ", optim.beta2, " (expected below 1: AdamW divides by 1 - beta2^t)");
  VLM_REQUIRE(optim.eps > 0, "--train.eps: ", optim.eps, " (expected above 0: AdamW divides by sqrt(v) + eps)");
  bool all = true;
  for (bool f : frozen) all = all && f;
  VLM_REQUIRE(!all, "--train.freeze: every module is frozen, nothing would train");
  VLM_REQUIRE(!run.empty() && run.find('/') == std::string::npos, "--train.run: a name without '/' is expected, got '",
              run, "'");
}

void register_all_train_options(Config& cfg) {
  register_runtime_options(cfg);
  register_vision_options(cfg);
  register_scorer_options(cfg);
  register_llm_options(cfg);
  sched::register_scheduler_options(cfg);
  register_train_options(cfg);
}

std::shared_ptr<const Tokenizer> find_tokenizer(const DataOptions& d, const DatasetReader& ds) {
  std::string path = d.tokenizer.empty() ? ds.tokenizer_path() : d.tokenizer;
  VLM_REQUIRE(!path.empty(), "--data.tokenizer: a tokenizer.json is required (", d.path,
              ds.tokenizer_name().empty() ? std::string(" names none")
                                          : cat(" names ", ds.tokenizer_name(), ", found neither beside it nor here"),
              "; make one with `vlm data tokenizer`)");
  return std::make_shared<const Tokenizer>(Tokenizer::load(path));
}

VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, const Tokenizer& tok, int tp) {
  return resolve_vlm_config(cfg, t, tok.vocab_size(), tp);
}

VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, int64_t tok_vocab, int tp) {
  VlmConfig v;
  v.vision = resolve_vision_config(cfg);
  v.llm = t.llm_hf.empty() ? read_model_config(cfg) : read_hf_config(t.llm_hf);
  if (t.llm_hf.empty() && !model_options().is_set(cfg, &ModelConfig::vocab_size)) v.llm.vocab_size = tok_vocab;
  v.llm.validate(tp);
  VLM_REQUIRE(tok_vocab <= v.llm.vocab_size, "the tokenizer's vocabulary (", tok_vocab,
              " tokens) exceeds the model's (model.vocab_size=", v.llm.vocab_size, ")");
  v.scorers = read_scorer_options(cfg);
  v.scorers.validate(v.vision.grid(), tp);
  // A placement that splits each scorer over a group gets the TP group for it (model/front_slot.h).
  const int group = make_placement(v.scorers.scorers.placement, tp)->split_group();
  VLM_REQUIRE(group == 0 || tp == group, "--scorers.placement=", v.scorers.scorers.placement, " needs parallel.tp=", group,
              " when training the VLM (its group of ", group, " ranks is the TP group), got parallel.tp=", tp);
  v.max_images = t.batch, v.max_text = t.max_text;
  v.frozen = t.frozen;
  v.precision = t.precision;
  v.front_slots = t.micro_batches >= 2 ? 2 : 1;  // micro-batch pipelining (train/step.h)
  const int64_t longest = v.scorers.lod.max_tokens + t.max_text;
  VLM_REQUIRE(longest <= v.llm.max_pos, "lod.max_tokens + train.max_text = ", longest, " exceeds model.max_pos=",
              v.llm.max_pos, " (the longest sample the backbone takes)");
  return v;
}

TextRule text_rule(const DataOptions& d, const TrainOptions& t, const Tokenizer& tok) {
  TextRule r;
  r.bos = tok.bos(), r.max_text = t.max_text;
  r.instruction = tok.encode(d.prompt);
  return r;
}

std::string instruction_cut_note(const TextRule& r) {
  // BOS, the prompt and at least a word and EOS of caption (as `vlm caption --prompt`).
  const int64_t most = int64_t(r.max_text) - 3;
  if (int64_t(r.instruction.size()) <= most) return "";
  const int64_t kept = std::min<int64_t>(int64_t(r.instruction.size()), int64_t(r.max_text) - 2);
  return cat("note: --data.prompt's ", r.instruction.size(), " tokens leave little room in train.max_text=", r.max_text,
             ": a sample without a prompt of its own keeps ", kept, " of them and at most ",
             int64_t(r.max_text) - 1 - kept, " caption tokens (prompts of at most ", std::max<int64_t>(most, 0),
             " tokens leave room for a word and EOS)");
}

int64_t TrainOptions::total_steps(int64_t steps_per_epoch) const {
  if (steps > 0) return steps;
  return std::max<int64_t>(1, int64_t(std::ceil(epochs * double(steps_per_epoch) / micro_batches)));
}

}  // namespace vlm

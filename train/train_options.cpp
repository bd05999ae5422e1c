// The options of `vlm train` (train/train_options.h).
#include "train/train_options.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/config.h"
#include "base/error.h"
#include "data/storage/dataset.h"
#include "llm/hf_config.h"
#include "parallel/runtime.h"
#include "scheduler/options.h"
#include "scorers/placement/placement.h"
#include "vision/siglip_config.h"

namespace vlm {

void register_train_options(Config& cfg) {
  cfg.add_string("data.path", "", "image-text HDF5 file to train on (vlm data build)");
  cfg.add_string("data.tokenizer", "", "tokenizer.json (default: the token ids stored in the file)");
  cfg.add_string("data.prompt", "Describe the image.", "instruction given to every sample that has no prompt");
  cfg.add_string("data.train_split", "train", "split to train on (train|val|test|all)");
  cfg.add_string("data.val_split", "val", "split of the validation loss (train.eval_every)");
  cfg.add_int("data.threads", 2, "loader threads (decode, resize, texture)", 1, 256);
  cfg.add_int("data.prefetch", 4, "batches prepared ahead", 1, 1024);

  cfg.add_int("train.steps", 0, "optimizer steps (0 = train.epochs)", 0, int64_t(1) << 40);
  cfg.add_float("train.epochs", 0, "epochs over the train split when train.steps = 0", 0, 1e6);
  cfg.add_int("train.batch", 8, "images per micro-batch per DP rank", 1, 1 << 20);
  cfg.add_int("train.micro_batches", 1, "micro-batches per optimizer step (gradient accumulation)", 1, 1 << 20);
  cfg.add_int("train.global_batch", 0, "images per optimizer step; must equal dp x micro_batches x batch (0 = that)",
              0, int64_t(1) << 40);
  cfg.add_int("train.max_text", 48, "prompt + caption tokens per sample (longer captions are cut)", 2, 1 << 20);
  cfg.add_float("train.lr", 1e-3, "peak learning rate", 0, 10);
  cfg.add_float("train.min_lr_ratio", 0.1, "final learning rate / peak (cosine, linear)", 0, 1);
  cfg.add_int("train.warmup", 0, "linear warmup steps", 0, int64_t(1) << 40);
  cfg.add_choice("train.schedule", "cosine", {"cosine", "linear", "constant"}, "learning-rate decay after warmup");
  cfg.add_float("train.weight_decay", 0.01, "AdamW weight decay (matrices only, optim/optimizer.h)", 0, 10);
  cfg.add_float("train.beta1", 0.9, "AdamW beta1", 0, 1);
  cfg.add_float("train.beta2", 0.95, "AdamW beta2", 0, 1);
  cfg.add_float("train.eps", 1e-8, "AdamW epsilon", 0, 1);
  cfg.add_float("train.clip", 1.0, "max global gradient norm (0 = no clipping)", 0, 1e30);
  cfg.add_string("train.freeze", "", "modules not trained: comma list of vision,projector,scorers,llm");
  cfg.add_int("train.zero", 0,
              "ZeRO stage over DP (docs/training.md): 0 none; 1 f32 master weights and AdamW moments sharded "
              "(distributed optimizer); 2 also the gradients, reduce-scattered per layer; 3 also the parameters "
              "(FSDP: each layer gathered before use)",
              0, 3);
  cfg.add_int("train.log_every", 10, "progress line every N steps", 1, int64_t(1) << 40);
  cfg.add_int("train.eval_every", 0, "validation loss every N steps (0 = at the end only)", 0, int64_t(1) << 40);
  cfg.add_int("train.eval_batches", 8, "batches of the validation loss", 1, 1 << 20);
  cfg.add_string("train.run", "run", "run name: outputs go to <train.out_dir>/<train.run>/");
  cfg.add_string("train.out_dir", "runs", "folder of the runs");
  cfg.add_int("train.save_every", 0,
              "checkpoint every N steps and at the end (0 = at the end only, -1 = never; docs/checkpoints.md)", -1,
              int64_t(1) << 40);
  cfg.add_int("train.keep_last", 3, "checkpoints kept in train.ckpt_dir (0 = all)", 0, 1 << 20);
  cfg.add_string("train.ckpt_dir", "", "checkpoint folder (empty = <train.out_dir>/<train.run>/checkpoints)");
  cfg.add_string("train.resume", "",
                 "resume from a checkpoint: auto (the newest in train.ckpt_dir, when there is one), a step_N.h5 "
                 "file or a checkpoint folder; empty = start afresh");
  cfg.add_float("train.bucket_mb", 25, "DP gradient bucket size in MiB", 0.001, 1 << 20);
  cfg.add_choice("train.precision", "fp32", {"fp32", "bf16"},
                 "arithmetic: fp32, or bf16 mixed precision (bf16 weight copies and activations, f32 master "
                 "weights, gradients and statistics; docs/training.md)");
  cfg.add_choice("train.grad_reduce_dtype", "fp32", {"fp32", "bf16"},
                 "dtype of the DP gradient buckets on the wire (bf16 halves the traffic; the sums land in f32)");
  cfg.add_float("train.peak_tflops", 0,
                "peak TFLOP/s per rank of the MFU in the progress line (0 = the GPU's dense peak at train.precision "
                "for an H100, H200 or A100; on the CPU or another GPU no MFU unless set)",
                0, 1e9);
  cfg.add_string("llm.hf", "", "Hugging Face Llama/Qwen2/GPT-2 checkpoint directory for the backbone");

  cfg.add_string("eval.split", "test", "split of the caption accuracy after training (empty = none)");
  cfg.add_int("eval.images", 0, "images of the caption accuracy per DP rank (0 = the whole split)", 0, int64_t(1) << 40);
  cfg.add_int("eval.pictures", 8, "relevance pictures written after training", 0, 4096);
  cfg.add_int("eval.max_new", 24, "greedy decoding: tokens generated at most", 1, 4096);
}

DataOptions read_data_options(const Config& cfg) {
  DataOptions d;
  d.path = cfg.get_string("data.path");
  d.tokenizer = cfg.get_string("data.tokenizer");
  d.prompt = cfg.get_string("data.prompt");
  d.train_split = cfg.get_string("data.train_split");
  d.val_split = cfg.get_string("data.val_split");
  d.threads = int(cfg.get_int("data.threads"));
  d.prefetch = int(cfg.get_int("data.prefetch"));
  return d;
}

EvalOptions read_eval_options(const Config& cfg) {
  EvalOptions e;
  e.split = cfg.get_string("eval.split");
  e.images = cfg.get_int("eval.images");
  e.pictures = int(cfg.get_int("eval.pictures"));
  e.max_new = int(cfg.get_int("eval.max_new"));
  return e;
}

TrainOptions read_train_options(const Config& cfg) {
  TrainOptions t;
  t.steps = cfg.get_int("train.steps");
  t.epochs = cfg.get_float("train.epochs");
  t.batch = int(cfg.get_int("train.batch"));
  t.micro_batches = int(cfg.get_int("train.micro_batches"));
  t.global_batch = cfg.get_int("train.global_batch");
  t.max_text = int(cfg.get_int("train.max_text"));
  t.optim.lr = cfg.get_float("train.lr");
  t.optim.min_lr_ratio = cfg.get_float("train.min_lr_ratio");
  t.optim.warmup = cfg.get_int("train.warmup");
  t.optim.schedule = parse_schedule(cfg.get_string("train.schedule"));
  t.optim.weight_decay = float(cfg.get_float("train.weight_decay"));
  t.optim.beta1 = float(cfg.get_float("train.beta1"));
  t.optim.beta2 = float(cfg.get_float("train.beta2"));
  t.optim.eps = float(cfg.get_float("train.eps"));
  t.optim.clip = float(cfg.get_float("train.clip"));
  std::stringstream ss(cfg.get_string("train.freeze"));
  for (std::string w; std::getline(ss, w, ',');) {
    if (w.empty()) continue;
    bool found = false;
    for (int m = 0; m < kNumModules; ++m)
      if (w == module_name(ModuleId(m))) t.frozen[size_t(m)] = found = true;
    VLM_REQUIRE(found, "--train.freeze: unknown module '", w, "' (expected a comma list of vision, projector, scorers, llm)");
  }
  t.zero = int(cfg.get_int("train.zero"));
  t.log_every = int(cfg.get_int("train.log_every"));
  t.eval_every = int(cfg.get_int("train.eval_every"));
  t.eval_batches = int(cfg.get_int("train.eval_batches"));
  t.run = cfg.get_string("train.run");
  t.out_dir = cfg.get_string("train.out_dir");
  t.bucket_mb = cfg.get_float("train.bucket_mb");
  t.precision = cfg.get_string("train.precision") == "bf16" ? Precision::BF16 : Precision::FP32;
  t.grad_reduce_bf16 = cfg.get_string("train.grad_reduce_dtype") == "bf16";
  t.save_every = cfg.get_int("train.save_every");
  t.keep_last = int(cfg.get_int("train.keep_last"));
  t.ckpt_dir = cfg.get_string("train.ckpt_dir");
  if (t.ckpt_dir.empty()) t.ckpt_dir = t.out_dir + "/" + t.run + "/checkpoints";
  t.resume = cfg.get_string("train.resume");
  t.llm_hf = cfg.get_string("llm.hf");
  t.peak_tflops = cfg.get_float("train.peak_tflops");
  return t;
}

void TrainOptions::check(int dp) const {
  const int64_t derived = int64_t(dp) * micro_batches * batch;
  VLM_REQUIRE(global_batch == 0 || global_batch == derived, "--train.global_batch=", global_batch,
              " must equal dp x train.micro_batches x train.batch = ", dp, " x ", micro_batches, " x ", batch, " = ",
              derived);
  VLM_REQUIRE(steps > 0 || epochs > 0, "--train.steps or --train.epochs: one must be positive");
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
  std::string path = d.tokenizer;
  if (path.empty() && std::filesystem::is_regular_file(ds.tokenizer_name())) path = ds.tokenizer_name();
  VLM_REQUIRE(!path.empty(), "--data.tokenizer: a tokenizer.json is required (", d.path,
              " names none that exists; make one with `vlm data tokenizer`)");
  return std::make_shared<const Tokenizer>(Tokenizer::load(path));
}

VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, const Tokenizer& tok, int tp) {
  return resolve_vlm_config(cfg, t, tok.vocab_size(), tp);
}

VlmConfig resolve_vlm_config(const Config& cfg, const TrainOptions& t, int64_t tok_vocab, int tp) {
  VlmConfig v;
  v.vision = resolve_vision_config(cfg);
  v.llm = t.llm_hf.empty() ? read_model_config(cfg) : read_hf_config(t.llm_hf);
  if (t.llm_hf.empty() && !cfg.is_set("model.vocab_size")) v.llm.vocab_size = tok_vocab;
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
  VLM_REQUIRE(v.llm.is_llama() || longest <= v.llm.max_pos, "lod.max_tokens + train.max_text = ", longest,
              " exceeds model.max_pos=", v.llm.max_pos, " (the learned position table)");
  return v;
}

TextRule text_rule(const DataOptions& d, const TrainOptions& t, const Tokenizer& tok) {
  TextRule r;
  r.bos = tok.bos(), r.max_text = t.max_text;
  r.instruction = tok.encode(d.prompt);
  return r;
}

int64_t TrainOptions::total_steps(int64_t steps_per_epoch) const {
  if (steps > 0) return steps;
  return std::max<int64_t>(1, int64_t(std::ceil(epochs * double(steps_per_epoch) / micro_batches)));
}

}  // namespace vlm

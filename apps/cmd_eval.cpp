// `vlm eval`: measures a checkpoint of `vlm train` on a split of an image-text HDF5 file
// (docs/caption-and-eval.md, "Evaluation"):
//   [mpirun -np N] vlm eval --checkpoint CKPT --data F.h5 [--split test] [--images N]
//                           [--batch B] [--max_new T] [--out metrics.json] [--tp K]
// Any (tp, dp) layout: the model is loaded in the launch's TP layout (load_trained_model),
// the samples (one per caption) are DP-sharded by the sampler of the run's seed, sums are
// all-reduced, so every layout gives the same figures (up to float summation order):
//   loss          mean cross-entropy per caption token (model/evaluate.h validation_loss)
//   perplexity    exp(loss)
//   exact_match   greedy-decoded caption == one of the image's own captions
//   class_accuracy  the decoded caption is a caption (anywhere in the file) of the image's
//                 class (datasets with /labels only; null otherwise)
// --images N evaluates the first N samples of the split in the sampler's order (the same
// subset for every layout; LoaderOptions::limit); the sampler's seed is the run's unless
// --seed is given. Rank 0 prints the figures and writes
// --out (JSON, atomic). Inputs are checked on every rank in one agreed step first.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "apps/command.h"
#include "base/error.h"
#include "base/json.h"
#include "base/options.h"
#include "checkpoint/checkpoint.h"
#include "core/device_options.h"
#include "data/storage/dataset.h"
#include "io/atomic_file.h"
#include "model/evaluate.h"
#include "parallel/runtime.h"
#include "runlog/run_log.h"
#include "train/train_options.h"
#include "train/trained_model.h"

namespace vlm {

namespace {

struct EvalInputs {
  std::string checkpoint, data, split = "test", out;
  int64_t images = 0;
  int batch = 0, max_new = 0, threads = 1, prefetch = 2;
  uint64_t seed = 0;
};

// The options of the command; the rest is filled from the checkpoint's run.
const OptionSet<EvalInputs>& eval_inputs() {
  static const OptionSet<EvalInputs> set([](OptionSet<EvalInputs>& s) {
    s.option("checkpoint", &EvalInputs::checkpoint, "a checkpoint of vlm train: a step_N folder, a step_N.h5 file, or a checkpoint folder (its `latest`)");
    s.option("data", &EvalInputs::data, "image-text HDF5 file (vlm data build)");
    s.option("split", &EvalInputs::split, "split to evaluate").one_of(DatasetReader::split_names());
    s.option("images", &EvalInputs::images,
             "evaluate the first N samples of the split in the sampler's order (0 = all)")
        .range(0, int64_t(1) << 40);
    s.option("batch", &EvalInputs::batch, "images per forward per DP rank (0 = the run's train.batch)")
        .range(0, 1 << 20);
    s.option("max_new", &EvalInputs::max_new, "greedy decoding length limit (0 = the run's eval.max_new)")
        .range(0, 1 << 20);
    s.option("out", &EvalInputs::out, "JSON file of the figures (optional)");
  });
  return set;
}

void eval_options(Config& cfg) {
  eval_inputs().add_to(cfg);
  register_runtime_options(cfg);
}

int eval(const Config& cfg) {
  using Clock = std::chrono::steady_clock;
  Runtime rt = start_runtime(cfg);
  EvalInputs in;
  rt.on_every_rank("inputs", [&] {
    in = eval_inputs().read(cfg);
    VLM_REQUIRE(!in.checkpoint.empty(), "--checkpoint: a checkpoint file or folder is required");
    VLM_REQUIRE(!in.data.empty(), "--data: an image-text HDF5 file is required (vlm data build)");
    if (!in.out.empty()) check_output_path(in.out, cfg, {{"--checkpoint", in.checkpoint}, {"--data", in.data}});
    in.checkpoint = resolve_checkpoint(in.checkpoint);
    const CheckpointReader ck(in.checkpoint);
    const std::unique_ptr<Config> opts = checkpoint_options(ck);
    const TrainOptions t = read_train_options(*opts);
    const DataOptions d = read_data_options(*opts);
    if (in.batch == 0) in.batch = t.batch;
    if (in.max_new == 0) in.max_new = read_eval_options(*opts).max_new;
    in.threads = d.threads, in.prefetch = d.prefetch;
    const bool own_seed = device_options().is_set(cfg, &DeviceOptions::seed);
    in.seed = read_device_options(own_seed ? cfg : *opts).seed;  // the sampler's
    VLM_REQUIRE(in.split == "all" || in.split == "train" || in.split == "val" || in.split == "test", "--split ",
                in.split, ": expected train, val, test or all");
    const DatasetReader ds(in.data);
    const int64_t n = int64_t(ds.split_captions(in.split).size());
    VLM_REQUIRE(n > 0, in.data, ": split '", in.split, "' has no captions (--split)");
    VLM_REQUIRE(in.images <= n, "--images ", in.images, ": split '", in.split, "' of ", in.data, " has ", n,
                " samples (0 = all of them)");
  });
  const auto t0 = Clock::now();
  TrainedModel tm = load_trained_model(in.checkpoint, rt, in.batch, "--batch");
  Stream& s = rt.backend().default_stream();
  Communicator& dp = rt.groups().dp();
  LoaderOptions o;
  o.path = in.data, o.split = in.split, o.batch_size = in.batch, o.limit = in.images;
  o.image_size = tm.vcfg.vision.image_size, o.grid = tm.vcfg.vision.grid();
  o.threads = in.threads, o.prefetch = in.prefetch, o.seed = in.seed;
  o.dp_size = rt.topology().dp(), o.dp_rank = rt.topology().self().dp_rank;
  o.texture = true, o.tokenizer = tm.tok, o.max_tokens = tm.rule.max_text;

  double tokens = 0;
  Loader for_loss(o);
  const double loss =
      validation_loss(*tm.model, s, dp, for_loss, tm.rule, int(for_loss.steps_per_epoch()), nullptr, &tokens);
  Loader for_acc(o);
  const DatasetReader& ds = for_acc.dataset();
  const bool labelled = !ds.labels().empty();
  const auto classes = labelled ? class_captions(ds, "all") : std::map<std::string, int32_t>{};
  const ImageCaptions refs = image_captions(ds, in.split);
  const AccuracyReport a = caption_accuracy(*tm.model, s, dp, for_acc, tm.rule, *tm.tok, classes, 0, in.max_new, 0,
                                            "", rt.root(), &refs);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!rt.root()) return 0;

  for (const std::string& e : a.examples) std::printf("  %s\n", e.c_str());
  std::printf("vlm eval: %s (step %lld) on %s split %s: %lld samples, %.0f caption tokens | tp=%d dp=%d | %s\n",
              in.checkpoint.c_str(), (long long)tm.state.step, in.data.c_str(), in.split.c_str(),
              (long long)a.images, tokens, rt.topology().tp(), rt.topology().dp(), format_duration(seconds).c_str());
  std::printf("  loss %.6f | perplexity %.4f | exact match %.2f%% (%lld)", loss, std::exp(loss),
              100.0 * a.exact_accuracy(), (long long)a.exact);
  if (labelled) std::printf(" | class accuracy %.2f%% (%lld)", 100.0 * a.accuracy(), (long long)a.correct);
  std::printf("\n");
  if (!in.out.empty()) {
    using json::Value;
    Value v = Value::object();
    v.set("checkpoint", Value::string(in.checkpoint));
    v.set("step", Value::integer(tm.state.step));
    v.set("data", Value::string(in.data));
    v.set("split", Value::string(in.split));
    v.set("samples", Value::integer(a.images));
    v.set("tokens", Value::integer(int64_t(tokens)));
    v.set("loss", Value::number(loss));
    v.set("perplexity", Value::number(std::exp(loss)));
    v.set("exact_match", Value::number(a.exact_accuracy()));
    v.set("exact_matches", Value::integer(a.exact));
    v.set("class_accuracy", labelled ? Value::number(a.accuracy()) : Value::null());
    v.set("class_correct", labelled ? Value::integer(a.correct) : Value::null());
    v.set("max_new", Value::integer(in.max_new));
    v.set("tp", Value::integer(rt.topology().tp()));
    v.set("dp", Value::integer(rt.topology().dp()));
    write_file_atomic(in.out, json::write(v) + "\n");
    std::printf("  figures: %s\n", in.out.c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

VLM_COMMAND(eval_cmd, {.path = "eval",
                       .summary = "measure a checkpoint on a split: caption loss, perplexity, exact-match and class "
                                  "accuracy of greedy captions",
                       .usage = "--checkpoint CKPT --data F.h5 [--split test] [--images N] [--out metrics.json]\n"
                                "Under mpirun any tp x dp layout (the samples are DP-sharded). Prints the figures; "
                                "--out writes them as JSON. See docs/caption-and-eval.md.",
                       .options = eval_options,
                       .run = eval,
                       .multi_rank = true});

}  // namespace vlm

// Trainer (train/trainer.h).
#include "train/trainer.h"
#include "train/trainer_state.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "base/config.h"
#include "base/error.h"
#include "base/stop_signal.h"
#include "checkpoint/checkpoint.h"
#include "core/counting_backend.h"
#include "core/device_options.h"
#include "core/out_of_memory.h"
#include "data/storage/dataset.h"
#include "io/atomic_file.h"
#include "llm/hf_import.h"
#include "model/batch.h"
#include "model/evaluate.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"
#include "runlog/run_log.h"
#include "scheduler/options.h"
#include "scheduler/trace.h"
#include "train/memory_terms.h"
#include "train/lod_metrics.h"
#include "train/run_stats.h"
#include "train/step.h"
#include "train/train_measure.h"
#include "train/train_options.h"
#include "vision/siglip_config.h"
#include "vision/siglip_import.h"

namespace vlm {

Trainer::Trainer(const Config& cfg, Runtime& rt) : st_(std::make_unique<State>(cfg, rt)) {
  State& S = *st_;
  const int tp = rt.topology().tp(), dp = rt.topology().dp();
  rt.on_every_rank("inputs", [&] {
    S.data = read_data_options(cfg);
    S.train = read_train_options(cfg);
    S.eval = read_eval_options(cfg);
    S.sched = sched::read_scheduler_options(cfg);
    S.seed = read_device_options(cfg).seed;
    VLM_REQUIRE(!S.data.path.empty(), "--data.path: an image-text HDF5 file is required (vlm data build)");
    S.train.check(dp);
    DatasetReader ds(S.data.path);
    VLM_REQUIRE(ds.num_captions() > 0, S.data.path, ": the dataset has no captions to train on");
    VLM_REQUIRE(!ds.split_captions(S.data.train_split).empty(), S.data.path, ": split '", S.data.train_split,
                "' has no captions (--data.train_split)");
    VLM_REQUIRE(S.data.curriculum.empty() == (S.data.curriculum_steps == 0), "--data.curriculum_steps: ",
                S.data.curriculum_steps, " with --data.curriculum '", S.data.curriculum,
                "' (expected both set, a file and steps >= 1, or neither)");
    // Whether a training sample has no prompt of its own (it then gets data.prompt's).
    const auto without_prompt = [&](const DatasetReader& r) {
      for (int64_t j : r.split_captions(S.data.train_split))
        if (!r.has_prompt(j)) return true;
      return false;
    };
    bool instruction_used = without_prompt(ds);
    if (!S.data.curriculum.empty()) {
      DatasetReader cur(S.data.curriculum);
      VLM_REQUIRE(!cur.split_captions(S.data.train_split).empty(), S.data.curriculum, ": split '", S.data.train_split,
                  "' has no captions (--data.curriculum, --data.train_split)");
      instruction_used = instruction_used || without_prompt(cur);
    }
    S.tok = find_tokenizer(S.data, ds);
    S.vcfg = resolve_vlm_config(cfg, S.train, *S.tok, tp);
    S.vcfg.sharding = DpSharding{S.train.zero, dp, rt.groups().dp().rank()};  // nn/param_layout.h
    S.rule = text_rule(S.data, S.train, *S.tok);
    const std::string note = instruction_used ? instruction_cut_note(S.rule) : "";
    if (!note.empty() && rt.root()) std::printf("vlm train: %s\n", note.c_str());
    // The outputs, last: a run refused above creates nothing.
    if (!S.sched.trace.empty())
      check_output_path(S.sched.trace, cfg,
                        {{"--data.path", S.data.path},
                         {"--data.curriculum", S.data.curriculum},
                         {"--data.tokenizer", S.data.tokenizer.empty() ? ds.tokenizer_path() : S.data.tokenizer}});
    if (S.train.save_every >= 0) check_checkpoint_folder(S.train.ckpt_dir);
  });

  S.layout.tp = tp, S.layout.tp_rank = rt.groups().tp().rank(), S.layout.dp = dp;
  S.layout.dp_rank = rt.groups().dp().rank(), S.layout.zero = S.train.zero, S.layout.bucket_mb = S.train.bucket_mb;
  S.layout.grad_wire = S.train.grad_reduce_bf16 ? DType::BF16 : DType::F32;
  S.meter = std::make_unique<CountingBackend>(rt.backend());
  Backend& b = *S.meter;
  S.self = make_communicator(b.device(), MPI_COMM_SELF, "self", rt.options().parallel.timeout_s);
  const char* building = "building the model";
  try {  // the planned memory: an allocation that fails is explained against the plan
    S.model = std::make_unique<VlmModel>(S.vcfg, b, rt.groups().tp(), *S.self);
    S.model->init(S.seed);
    if (!S.train.llm_hf.empty()) load_hf_checkpoint(S.model->llm(), S.train.llm_hf);
    if (!S.vcfg.vision.hf_dir.empty()) load_siglip(S.model->vision(), read_siglip_config(S.vcfg.vision.hf_dir));
    for (int m = 0; m < kNumModules; ++m) S.trainable.push_back(!S.train.frozen[size_t(m)]);
    S.streams = std::make_unique<sched::StreamSet>(b);
    StepOptions so;
    so.mode = S.sched.mode;
    building = "building the DP gradient reduction";
    S.dpg = std::make_unique<DpGrads>(S.model->modules(), S.trainable, rt.groups().dp(), S.train.zero,
                                       S.train.bucket_mb, b, S.train.grad_reduce_bf16 ? DType::BF16 : DType::F32);
    S.dpg->attach(*S.model);  // ZeRO >= 2: the encoder's block hooks; ZeRO-3: evaluation fetches the layers
    building = "building the step";
    S.step = std::make_unique<VlmStep>(*S.model, *S.streams, *S.dpg, S.trainable, S.train.micro_batches, so);
    building = "building the optimizer state";
    S.opt = std::make_unique<AdamW>(S.model->modules(), S.trainable, *S.dpg, b, S.train.optim);
  } catch (const OutOfMemory& e) {
    const size_t live = S.meter->live_bytes();
    S.opt.reset(), S.step.reset(), S.dpg.reset(), S.streams.reset(), S.model.reset();  // the memory back first
    throw UserError(S.out_of_memory(e, building, live));
  }
  S.plan = rank_plan(*S.model, *S.dpg, *S.opt, S.meter->live_bytes());
  S.peak = mfu_peak(S.train.peak_tflops, b.device(), b.description(), S.vcfg.precision);
  LoaderOptions train_lo = S.loader_options(S.data.train_split);
  train_lo.augment = S.data.augment;  // the training batches only, never validation or evaluation
  S.loader = std::make_unique<Loader>(train_lo);
  S.total = S.train.total_steps(S.loader->steps_per_epoch());
  VLM_REQUIRE(S.train.stop_after <= S.total, "--train.stop_after: step ", S.train.stop_after, " is past the run's last step ",
              S.total, " (expected at most that, or 0)");
  if (!S.data.curriculum.empty()) {
    VLM_REQUIRE(S.data.curriculum_steps < S.total, "--data.curriculum_steps: ", S.data.curriculum_steps,
                " leaves none of the run's ", S.total, " steps to ", S.data.path, " (expected fewer)");
    LoaderOptions lo = train_lo;
    lo.path = S.data.curriculum;
    S.curriculum = std::make_unique<Loader>(lo);
  }
  S.log = std::make_unique<RunLog>(S.train.out_dir + "/" + S.train.run, rt.root(), cfg.dump_ini());
  if (!S.train.resume.empty()) S.resume();
  S.log->start_after(S.start - 1, S.start > S.last_step());
  S.model->refresh_working_weights();  // bf16 copies of the initial weights (no-op at fp32)
}

Trainer::~Trainer() = default;

VlmModel& Trainer::model() { return *st_->model; }
LoaderOptions Trainer::loader_options(const std::string& split) const { return st_->loader_options(split); }
const TextRule& Trainer::rule() const { return st_->rule; }
const Tokenizer& Trainer::tokenizer() const { return *st_->tok; }

TrainReport Trainer::run() {
  try {
    return run_steps();
  } catch (const OutOfMemory& e) {  // a buffer that grows in a step (the plan counts its first size)
    throw UserError(st_->out_of_memory(e, "training", st_->meter->live_bytes()));
  }
}

// The run, top-down: the step loop, then the summary of the steps, the validation and
// the caption accuracy.
TrainReport Trainer::run_steps() {
  State& S = *st_;
  Runtime& rt = S.rt;
  Communicator& tp = rt.groups().tp();
  S.print_header();
  S.meter->reset_peak();
  sched::Trace trace(rt.topology().world_rank());
  RunStats stats(tp.counters().total_bytes(), S.dpg->counters().total_bytes());
  const auto t_start = TrainClock::now();
  const int64_t last = S.last_step();
  std::optional<StopSignal> stop;  // train.on_signal=save: a signal ends the run between two steps
  if (S.train.save_on_signal) stop.emplace();
  const auto stop_if_asked = [&](int64_t n, bool saved) { S.stop_if_asked(stop ? &*stop : nullptr, n, saved); };
  seconds_of_steps();  // train.time_limit counts from here (from the first run of the process: vlm ablate's)
  for (int64_t step = S.start; step <= last; ++step) {
    const RunStats::Step st = S.train_step(step, trace, seconds_since(t_start));
    stats.add(st);
    const bool save =
        S.train.save_every >= 0 && (step == last || (S.train.save_every > 0 && step % S.train.save_every == 0));
    if (save) S.save(step);
    stop_if_asked(step, save);
    if (S.train.eval_every > 0 && step % S.train.eval_every == 0 && step < last) {
      const double v = S.validate(step);
      if (rt.root()) std::printf("step %lld: val loss %.4f (%s)\n", (long long)step, v, S.data.val_split.c_str());
      stop_if_asked(step, save);  // a stop asked during the validation
    }
  }
  stop.reset();  // the final validation and evaluation end at a signal, as any program
  TrainReport rep = stats.report(seconds_since(t_start), tp.counters().total_bytes(), S.dpg->counters().total_bytes());
  rep.steps = last;
  rep.optimizer_bytes = S.plan.memory.optimizer, rep.grad_bytes = S.plan.memory.grads;
  rep.planned_arena_bytes = S.plan.memory.total(), rep.peak_arena_bytes = S.meter->peak_bytes();
  report_memory_and_bytes(rt, rt.backend().default_stream(), rep);
  const bool ran = !rep.losses.empty();  // none when resumed from the run's last step (a stop there)
  if (rt.root() && ran) std::printf("%s\n", stats.time_line(rep.train_seconds).c_str());
  S.write_trace(trace);
  if (!S.loader->dataset().split_captions(S.data.val_split).empty()) rep.val_loss = S.validate(last);
  S.caption_accuracy(rep);
  if (rt.root()) {
    char val[96];
    if (rep.val_loss >= 0)
      std::snprintf(val, sizeof val, "val loss %.4f", rep.val_loss);
    else
      std::snprintf(val, sizeof val, "no val loss (split %s is empty)", S.data.val_split.c_str());
    if (ran)
      std::printf("vlm train: %lld steps in %s | loss %.4f -> %.4f | %s | %.1f img/s | %.0f tok/s | run %s\n",
                  (long long)rep.steps, format_duration(rep.train_seconds).c_str(), rep.first_loss, rep.last_loss,
                  val, rep.images_per_s, rep.tokens_per_s, S.log->dir().c_str());
    else
      std::printf("vlm train: no step left (resumed at step %lld, the last of this run) | %s | run %s\n",
                  (long long)(S.start - 1), val, S.log->dir().c_str());
    std::fflush(stdout);
  }
  return rep;
}

void Trainer::State::print_header() const {
  if (!rt.root()) return;
  const std::string stop =
      train.stop_after > 0 && train.stop_after < total ? cat(" (stopping after step ", train.stop_after, ")") : "";
  std::printf("vlm train: %s | tp=%d dp=%d | %lld steps%s of %d x %d x %d images | %s\n",
              rt.backend().description().c_str(), rt.topology().tp(), rt.topology().dp(), (long long)total,
              stop.c_str(), rt.topology().dp(), train.micro_batches, train.batch, sched::mode_name(sched.mode));
  if (curriculum)
    std::printf("  curriculum: steps 1..%lld read %s, then %s\n", (long long)data.curriculum_steps,
                data.curriculum.c_str(), data.path.c_str());
  std::printf("  vision %s\n  llm    %s\n  precision %s | memory (rank 0, planned): %s\n", vcfg.vision.str().c_str(),
              vcfg.llm.str().c_str(), vcfg.precision == Precision::BF16 ? "bf16" : "fp32", plan.memory.str().c_str());
  if (!peak.note.empty()) std::printf("  %s\n", peak.note.c_str());
  std::fflush(stdout);
}

// The validation loss over train.eval_batches of the val split, logged at step n with
// the relevance pictures of its first images: the periodic and the final validation.
double Trainer::State::validate(int64_t n) {
  Loader val(loader_options(data.val_split));
  std::vector<std::vector<uint8_t>> pics(size_t(rt.root() ? eval.pictures : 0));
  const double v = validation_loss(*model, rt.backend().default_stream(), rt.groups().dp(), val, rule,
                                   train.eval_batches, &pics);
  log->scalars(n, {{"loss", v}}, "val");
  const int px = vcfg.vision.image_size * std::max(1, kPictureSide / vcfg.vision.image_size);
  for (size_t k = 0; k < pics.size(); ++k) log->image("relevance/" + std::to_string(k), n, pics[k], px, px);
  return v;
}

// The caption accuracy of eval.split (when the dataset has labels and the split
// captions), into rep and the metrics, with its examples and pictures.
void Trainer::State::caption_accuracy(TrainReport& rep) {
  const DatasetReader& ds = loader->dataset();
  if (eval.split.empty() || ds.labels().empty() || ds.split_captions(eval.split).empty()) return;
  const auto classes = class_captions(ds, data.train_split);
  Loader ev(loader_options(eval.split));
  const auto t_eval = TrainClock::now();
  const AccuracyReport a = vlm::caption_accuracy(*model, rt.backend().default_stream(), rt.groups().dp(), ev, rule,
                                                 *tok, classes, eval.images, eval.max_new, eval.pictures, log->dir(),
                                                 rt.root());
  rep.accuracy = a.accuracy(), rep.eval_images = a.images;
  log->scalars(total, {{"caption_accuracy", rep.accuracy}}, "eval");
  if (!rt.root()) return;
  for (const std::string& e : a.examples) std::printf("  %s\n", e.c_str());
  std::printf("caption accuracy on %s: %.2f%% (%lld of %lld images, %s)\n", eval.split.c_str(), 100.0 * rep.accuracy,
              (long long)a.correct, (long long)a.images, format_duration(seconds_since(t_eval)).c_str());
  if (eval.pictures > 0) std::printf("relevance pictures: %s/relevance_*.png\n", log->dir().c_str());
}

// The step graph's trace of every rank (scheduler.trace), gathered to rank 0's file.
void Trainer::State::write_trace(const sched::Trace& trace) {
  if (sched.trace.empty()) return;
  const std::vector<std::string> ev =
      all_gather_strings(rt.groups().world(), rt.backend().default_stream(), trace.events_json());
  if (!rt.root()) return;
  sched::write_trace_file(sched.trace, ev);
  std::printf("trace: %s (open in https://ui.perfetto.dev)\n", sched.trace.c_str());
}

}  // namespace vlm

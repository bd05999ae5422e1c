// Trainer (train/trainer.h).
#include "train/trainer.h"
#include "train/trainer_state.h"

#include <mpi.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "base/config.h"
#include "core/counting_backend.h"
#include "core/out_of_memory.h"
#include "base/error.h"
#include "data/storage/dataset.h"
#include "llm/hf_import.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"
#include "scheduler/options.h"
#include "scheduler/trace.h"
#include "model/batch.h"
#include "checkpoint/checkpoint.h"
#include "model/evaluate.h"
#include "train/memory_terms.h"
#include "train/train_measure.h"
#include "runlog/run_log.h"
#include "train/step.h"
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
    S.sched = sched::scheduler_options(cfg);
    S.seed = uint64_t(cfg.get_int("seed"));
    VLM_REQUIRE(!S.data.path.empty(), "--data.path: an image-text HDF5 file is required (vlm data build)");
    S.train.check(dp);
    DatasetReader ds(S.data.path);
    VLM_REQUIRE(ds.num_captions() > 0, S.data.path, ": the dataset has no captions to train on");
    VLM_REQUIRE(!ds.split_captions(S.data.train_split).empty(), S.data.path, ": split '", S.data.train_split,
                "' has no captions (--data.train_split)");
    S.tok = find_tokenizer(S.data, ds);
    S.vcfg = resolve_vlm_config(cfg, S.train, *S.tok, tp);
    S.rule = text_rule(S.data, S.train, *S.tok);
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
  S.loader = std::make_unique<Loader>(S.loader_options(S.data.train_split));
  S.total = S.train.total_steps(S.loader->steps_per_epoch());
  S.log = std::make_unique<RunLog>(S.train.out_dir + "/" + S.train.run, rt.root(), cfg.dump_ini());
  if (!S.train.resume.empty()) S.resume();
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

TrainReport Trainer::run_steps() {
  State& S = *st_;
  Runtime& rt = S.rt;
  Stream& s = rt.backend().default_stream();
  Communicator& dp = rt.groups().dp();
  Communicator& tpc = rt.groups().tp();
  const int M = S.train.micro_batches;
  TrainReport rep;
  rep.optimizer_bytes = S.plan.memory.optimizer, rep.grad_bytes = S.plan.memory.grads;
  rep.planned_arena_bytes = S.plan.memory.total();
  const uint64_t tp_start = tpc.counters().total_bytes(), dp_start = dp.counters().total_bytes();
  double visual_sum = 0, image_sum = 0;
  if (rt.root()) {
    std::printf("vlm train: %s | tp=%d dp=%d | %lld steps of %d x %d x %d images | %s\n", rt.backend().description().c_str(),
                rt.topology().tp(), rt.topology().dp(), (long long)S.total, rt.topology().dp(), M, S.train.batch,
                sched::mode_name(S.sched.mode));
    std::printf("  vision %s\n  llm    %s\n  precision %s | memory (rank 0, planned): %s\n", S.vcfg.vision.str().c_str(),
                S.vcfg.llm.str().c_str(), S.vcfg.precision == Precision::BF16 ? "bf16" : "fp32",
                S.plan.memory.str().c_str());
    if (!S.peak.note.empty()) std::printf("  %s\n", S.peak.note.c_str());
    std::fflush(stdout);
  }
  S.meter->reset_peak();
  sched::Trace trace(rt.topology().world_rank());
  std::vector<sched::TaskTiming> timings;
  std::array<double, sched::kNumStreams> busy{};
  double graph_ms = 0, overlap = 0, exposed = 0, data_wait = 0;
  const auto t_start = TrainClock::now();
  double loss = 0;
  for (int64_t step = S.start; step <= S.total; ++step) {
    const auto t0 = TrainClock::now();
    const CommCounters tp0 = tpc.counters(), dp0 = dp.counters();
    std::vector<Batch> batches(static_cast<size_t>(M));
    std::vector<MicroBatch> mbs;
    double counted = 0;
    for (int m = 0; m < M; ++m) {
      const auto tw = TrainClock::now();
      batches[size_t(m)] = S.loader->next();
      data_wait += seconds_since(tw);
      mbs.push_back(make_micro_batch(batches[size_t(m)], S.rule, S.seed ^ uint64_t(step * M + m)));
      counted += double(mbs.back().counted());
    }
    const double global = all_reduce_values(dp, s, {counted})[0];
    for (MicroBatch& mb : mbs) mb.loss_norm = global > 0 ? global : 1.0;
    S.model->zero_grads();
    const double local = S.step->run(mbs, &timings);
    int64_t visual = 0, images = 0;  // this rank's, over the step's micro-batches
    for (const MicroBatch& mb : mbs) images += mb.images;
    for (int64_t v : S.step->visual_tokens()) visual += v;
    const double tokens = double(visual) + counted;
    const std::vector<double> tot = all_reduce_values(dp, s, {local, tokens, double(visual), double(images)});
    loss = tot[0];
    const double gnorm = S.opt->grad_norm(s, rt.groups().tp());
    if (!std::isfinite(loss) || !std::isfinite(gnorm))
      rt.on_every_rank("step " + std::to_string(step), [&] {
        throw UserError("step " + std::to_string(step) + ": the " + (std::isfinite(loss) ? "gradient norm" : "loss") +
                        " is not finite (" + std::to_string(std::isfinite(loss) ? gnorm : loss) +
                        "); stopped before the optimizer step (lower train.lr or raise train.warmup)");
      });
    const double lr = lr_at(S.train.optim, step, S.total);
    const float scale = S.train.optim.clip > 0 && gnorm > S.train.optim.clip ? float(S.train.optim.clip / gnorm) : 1.f;
    S.opt->step(s, step, lr, scale);
    S.model->refresh_working_weights();  // bf16 copies of the new weights
    s.synchronize();
    rep.comm_tp = counters_since(tpc.counters(), tp0), rep.comm_dp = counters_since(dp.counters(), dp0);
    if (step == S.start) rep.first_loss = loss;
    rep.losses.push_back(loss), visual_sum += tot[2], image_sum += tot[3];
    const double dt = seconds_since(t0), elapsed = seconds_since(t_start);
    // Memory: the process's peak resident set on CPU, the peak of the device arenas on a GPU.
    const double mem = S.meter->device() == DeviceKind::CPU ? peak_rss_bytes() : double(S.meter->peak_bytes());
    StepLine line{step, S.total, loss, lr, gnorm, dt, elapsed, tot[1] / dt, tot[3] / dt, tot[2] / std::max(1.0, tot[3]),
                  mem, std::nullopt};
    if (S.peak.flops_s > 0)  // this rank's (train/mfu.h)
      line.mfu = step_mfu(S.vcfg, S.layout.tp,
                          step_shape(mbs, visual, images), dt, S.peak.flops_s);
    const bool print = step % S.train.log_every == 0 || step == 1 || step == S.total;
    S.log->step(line, print);
    {  // the mean balancer weights of the last micro-batch (how much each scorer counts)
      s.synchronize();
      const std::vector<float> w = to_vector_f32(S.model->stage().balancer().weights());
      double m[3] = {0, 0, 0};
      for (size_t k = 0; k < w.size(); ++k) m[k % 3] += w[k] / double(w.size() / 3);
      S.log->scalars(step, {{"balancer_propositional", m[0]}, {"balancer_perspectival", m[1]},
                            {"balancer_participatory", m[2]}});
    }
    const sched::StepSummary sum = trace.add_step(S.step->graph(), timings);
    if (print && rt.root() && !S.sched.trace.empty()) std::printf("  %s\n", sum.line().c_str());
    for (int k = 0; k < sched::kNumStreams; ++k) busy[size_t(k)] += sum.busy_ms[size_t(k)];
    graph_ms += sum.step_ms, overlap += sum.overlap_fraction * sum.step_ms, exposed += sum.exposed_comm_ms;
    rep.images_per_s += tot[3], rep.tokens_per_s += tot[1];
    if (S.train.save_every >= 0 && (step == S.total || (S.train.save_every > 0 && step % S.train.save_every == 0)))
      S.save(step);
    if (S.train.eval_every > 0 && step % S.train.eval_every == 0 && step < S.total) {
      Loader val(S.loader_options(S.data.val_split));
      std::vector<std::vector<uint8_t>> pics(size_t(rt.root() ? S.eval.pictures : 0));
      const double v = validation_loss(*S.model, s, dp, val, S.rule, S.train.eval_batches, &pics);
      S.log->scalars(step, {{"loss", v}}, "val");
      const int px = S.vcfg.vision.image_size * std::max(1, kPictureSide / S.vcfg.vision.image_size);
      for (size_t k = 0; k < pics.size(); ++k) S.log->image("relevance/" + std::to_string(k), step, pics[k], px, px);
      if (rt.root()) std::printf("step %lld: val loss %.4f (%s)\n", (long long)step, v, S.data.val_split.c_str());
    }
  }
  rep.steps = S.total, rep.last_loss = loss;
  rep.peak_arena_bytes = S.meter->peak_bytes();
  report_memory_and_bytes(rt, s, rep);
  const double ran = double(std::max<int64_t>(1, S.total - S.start + 1));  // steps this process ran
  rep.train_seconds = seconds_since(t_start);
  rep.images_per_s /= rep.train_seconds, rep.tokens_per_s /= rep.train_seconds;
  rep.loader_stall = data_wait / rep.train_seconds;
  rep.step_seconds = rep.train_seconds / ran, rep.visual_tokens_per_image = visual_sum / std::max(1.0, image_sum);
  rep.tp_bytes_per_step = double(tpc.counters().total_bytes() - tp_start) / ran;
  rep.dp_bytes_per_step = double(dp.counters().total_bytes() - dp_start) / ran;
  if (rt.root()) {
    std::string split = "";
    for (int k = 0; k < sched::kNumStreams; ++k)
      split += " " + sched::stream_names()[size_t(k)] + " " + std::to_string(int(busy[size_t(k)] / ran + 0.5));
    const double n = ran;
    std::printf("time per step (mean): %.1f ms, of which the step graph %.1f ms (busy ms per stream:%s; overlap %.2f; "
                "exposed comm %.1f ms), waiting for data %.1f ms (loader stall %.1f%%)\n",
                1e3 * rep.train_seconds / n, graph_ms / n, split.c_str(), graph_ms > 0 ? overlap / graph_ms : 0.0,
                exposed / n, 1e3 * data_wait / n, 100.0 * rep.loader_stall);
  }
  if (!S.sched.trace.empty()) {
    const std::vector<std::string> ev = all_gather_strings(rt.groups().world(), s, trace.events_json());
    if (rt.root()) {
      sched::write_trace_file(S.sched.trace, ev);
      std::printf("trace: %s (open in https://ui.perfetto.dev)\n", S.sched.trace.c_str());
    }
  }
  const DatasetReader& ds = S.loader->dataset();
  if (!ds.split_captions(S.data.val_split).empty()) {
    Loader val(S.loader_options(S.data.val_split));
    std::vector<std::vector<uint8_t>> pics(size_t(rt.root() ? S.eval.pictures : 0));
    rep.val_loss = validation_loss(*S.model, s, dp, val, S.rule, S.train.eval_batches, &pics);
    S.log->scalars(S.total, {{"loss", rep.val_loss}}, "val");
    const int px = S.vcfg.vision.image_size * std::max(1, kPictureSide / S.vcfg.vision.image_size);
    for (size_t k = 0; k < pics.size(); ++k) S.log->image("relevance/" + std::to_string(k), S.total, pics[k], px, px);
  }
  if (!S.eval.split.empty() && !ds.labels().empty() && !ds.split_captions(S.eval.split).empty()) {
    const auto classes = class_captions(ds, S.data.train_split);
    Loader ev(S.loader_options(S.eval.split));
    const auto t_eval = TrainClock::now();
    const AccuracyReport a = caption_accuracy(*S.model, s, dp, ev, S.rule, *S.tok, classes, S.eval.images,
                                              S.eval.max_new, S.eval.pictures, S.log->dir(), rt.root());
    rep.accuracy = a.accuracy(), rep.eval_images = a.images;
    S.log->scalars(S.total, {{"caption_accuracy", rep.accuracy}}, "eval");
    if (rt.root()) {
      for (const std::string& e : a.examples) std::printf("  %s\n", e.c_str());
      std::printf("caption accuracy on %s: %.2f%% (%lld of %lld images, %s)\n", S.eval.split.c_str(),
                  100.0 * rep.accuracy, (long long)a.correct, (long long)a.images,
                  format_duration(seconds_since(t_eval)).c_str());
      if (S.eval.pictures > 0) std::printf("relevance pictures: %s/relevance_*.png\n", S.log->dir().c_str());
    }
  }
  if (rt.root()) {
    std::printf("vlm train: %lld steps in %s | loss %.4f -> %.4f | val loss %.4f | %.1f img/s | %.0f tok/s | run %s\n",
                (long long)rep.steps, format_duration(rep.train_seconds).c_str(), rep.first_loss, rep.last_loss,
                rep.val_loss, rep.images_per_s, rep.tokens_per_s, S.log->dir().c_str());
    std::fflush(stdout);
  }
  return rep;
}

}  // namespace vlm

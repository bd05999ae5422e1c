// Trainer::State: what one `vlm train` run holds (train/trainer.h), shared by the
// trainer's files: trainer.cpp (construction, the step loop and its pieces, the
// evaluation after training), trainer_step.cpp (one optimizer step), trainer_stop.cpp
// (the stop a signal or train.time_limit asks) and trainer_state.cpp (resume, save,
// loader options).
// Private to train/.
#pragma once
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/counting_backend.h"
#include "data/load/loader.h"
#include "data/text/tokenizer.h"
#include "model/batch.h"
#include "model/evaluate.h"
#include "model/vlm_model.h"
#include "optim/dp_grads.h"
#include "optim/optimizer.h"
#include "runlog/run_log.h"
#include "scheduler/options.h"
#include "scheduler/streams.h"
#include "train/memory_terms.h"
#include "train/mfu.h"
#include "train/run_stats.h"
#include "train/step.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace vlm {

class Config;
class OutOfMemory;
class Runtime;
class StopSignal;

using TrainClock = std::chrono::steady_clock;
inline double seconds_since(TrainClock::time_point t) {
  return std::chrono::duration<double>(TrainClock::now() - t).count();
}
// Seconds since the first call, made when the process's first run begins its steps (vlm
// ablate trains several runs): the clock of train.time_limit (train/trainer_stop.cpp).
double seconds_of_steps();

struct Trainer::State {
  const Config& cfg;
  Runtime& rt;
  DataOptions data;
  TrainOptions train;
  EvalOptions eval;
  sched::SchedulerOptions sched;
  VlmConfig vcfg;
  std::shared_ptr<const Tokenizer> tok;
  TextRule rule;
  std::unique_ptr<CountingBackend> meter;  // before what allocates through it: destroyed after them
  RankPlan plan;                           // of the objects below, after construction (its memory terms)
  RankLayout layout;                       // this rank's place in the layout
  MfuPeak peak;                            // the MFU's peak (train/mfu.h)
  std::unique_ptr<Communicator> self;
  std::unique_ptr<VlmModel> model;
  std::unique_ptr<sched::StreamSet> streams;
  std::unique_ptr<DpGrads> dpg;
  std::unique_ptr<VlmStep> step;
  std::unique_ptr<AdamW> opt;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Loader> curriculum;  // data.curriculum's train split, steps 1..data.curriculum_steps
  std::unique_ptr<RunLog> log;
  std::vector<bool> trainable;
  int64_t total = 0, start = 1;  // steps of the run; the first this process runs (after a resume)
  // The last step this process runs: train.stop_after when it is set and below total.
  int64_t last_step() const { return train.stop_after > 0 ? std::min(total, train.stop_after) : total; }
  uint64_t seed = 0;

  State(const Config& c, Runtime& r) : cfg(c), rt(r) {}
  LoaderOptions loader_options(const std::string& split) const;
  // The loader of step n's batches: the curriculum's up to data.curriculum_steps, then
  // data.path's. A checkpoint of step n holds its sampler state.
  Loader& loader_at(int64_t n) const;
  void resume();
  void save(int64_t step);
  // The one-line message of an allocation that failed `when` ("building the model"),
  // with `held` bytes allocated through meter at that moment (train/trainer.h).
  std::string out_of_memory(const OutOfMemory& e, const char* when, size_t held) const;
  // The pieces of Trainer::run (train/trainer.cpp).
  void print_header() const;
  RunStats::Step train_step(int64_t n, sched::Trace& trace, double elapsed_before);
  void log_balancer(int64_t n);
  void stop_if_asked(StopSignal* stop, int64_t n, bool saved);  // train/trainer_stop.cpp
  double validate(int64_t n);
  void caption_accuracy(TrainReport& rep);
  void write_trace(const sched::Trace& trace);
};

}  // namespace vlm

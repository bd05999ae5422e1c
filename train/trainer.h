// Trainer: `vlm train` on one rank of a TP x DP layout (docs/training.md). It assembles
// the VLM (model/vlm_model.h) from the options, reads the dataset through data/'s
// DP-sharded loader, runs optimizer steps through the scheduler's step (train/step.h)
// with AdamW (optim/optimizer.h), and reports through the run log
// (runlog/run_log.h). After training it evaluates (model/evaluate.h).
// Invariants:
//  - Inputs are checked on every rank in one agreed step before any work (the error
//    policy of parallel/runtime.h): a bad option or file ends every rank with exit 2.
//  - Every DP rank sees different samples, every TP rank the same; the step's loss is
//    the mean over the caption tokens of the global batch (MicroBatch::loss_norm), so
//    any (tp, dp) with the same global batch trains the same model.
//  - A non-finite loss or gradient norm stops the run with a UserError naming the step,
//    before the optimizer touches the weights.
//  - With train.on_signal=save, a SIGTERM, SIGINT or SIGUSR1 to any rank ends the run
//    after the step under way: every rank saves that step and throws Interrupted
//    (base/stop_signal.h; docs/preemption.md); so does train.time_limit
//    when any rank has trained that long.
//  - An allocation that fails (core/out_of_memory.h: a device out of memory, or a host
//    arena larger than the memory available) is a UserError naming the rank, the arena
//    and the bytes asked, the bytes this rank held, and what `vlm plan` predicts for
//    this rank of the layout (plan_rank, train/memory_terms.h), term by term; under
//    mpirun every rank then ends (parallel/runtime.h; docs/errors.md, "Out of memory").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace vlm {

class Config;
class Runtime;
class VlmModel;
class Tokenizer;
struct LoaderOptions;
struct TextRule;

struct TrainReport {
  int64_t steps = 0;
  double first_loss = 0, last_loss = 0, val_loss = -1;
  double accuracy = -1;      // caption accuracy of eval.split (-1: not evaluated)
  int64_t eval_images = 0;
  double train_seconds = 0, images_per_s = 0, tokens_per_s = 0;
  double loader_stall = 0;   // fraction of the training time spent waiting for batches
  // Memory of this rank (train/memory_terms.h MemoryTerms): optimizer state; gradients
  // (+ the bf16 copy of the DP reduction).
  size_t optimizer_bytes = 0, grad_bytes = 0;
  // This rank's device memory: the planned arenas (train/memory_terms.h, what `vlm plan`
  // predicts) and the measured peak of the bytes allocated through the training backend
  // during the training steps (core/counting_backend.h).
  size_t planned_arena_bytes = 0, peak_arena_bytes = 0;
  CommCounters comm_tp, comm_dp;  // bytes the last step moved on this rank's TP and DP groups
  // Over the steps this process ran: the mean step time, the mean visual tokens per
  // image, the loss of every step, and the bytes the TP and DP groups' collectives moved
  // per step (the growth of their byte counters, parallel/communicator.h).
  double step_seconds = 0, visual_tokens_per_image = 0;
  std::vector<double> losses;
  // Per step (train/lod_metrics.h): the relevance precision of the last micro-batch (-1
  // without caption boxes) and the norm of the scorers' gradient.
  std::vector<double> relevance_precision, scorer_grad_norms;
  double tp_bytes_per_step = 0, dp_bytes_per_step = 0;
};

class Trainer {
 public:
  Trainer(const Config& cfg, Runtime& rt);
  ~Trainer();
  TrainReport run();

  // After run(): the trained model and what evaluating it needs (ablate/ablate_eval.h).
  VlmModel& model();
  LoaderOptions loader_options(const std::string& split) const;
  const TextRule& rule() const;
  const Tokenizer& tokenizer() const;

 private:
  TrainReport run_steps();
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace vlm

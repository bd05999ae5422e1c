// VlmStep: the forward and backward of one optimizer step (M micro-batches) of the VLM
// on one rank, as a task graph on the scheduler's named streams (scheduler/graph.h),
// then the DP gradient reduction in buckets on the `comm` stream.
//
// Tasks of micro-batch m (stream; dependencies besides the stream's own order):
//   load.m        vision    host -> device copy of the images, texture and prompts
//                           (after vision.bwd, scorers.bwd and query.bwd of m-1)
//   vision.fwd.m  vision    encoder forward                          (after load.m)
//   query.m       llm       prompt embedding mean (TP all-reduce)    (after load.m)
//   scorers.pre.m scorer.0  the stage's inputs, encoder features     (after vision.fwd.m, query.m)
//   scorerK.m     scorer.K  scorer K's relevance map, K = 0, 1, 2: the three at once
//                                                                    (after scorers.pre.m)
//   scorers.post.m scorer.0 balancer, LOD allocation, visual tokens  (after scorer0..2.m)
//   llm.m         llm       projector + backbone forward and backward (after scorers.post.m)
//   scorers.bwd.m scorer.0  stage backward -> dF, dquery             (after llm.m)
//   query.bwd.m   llm       prompt embedding gradient                (after scorers.bwd.m)
//   vision.bwd.m  vision    encoder backward                         (after scorers.bwd.m)
// then, once per step:
//   finish        llm       TP-partial gradients of the backbone, the stage's placement
//                           traffic (after the last llm, query.bwd and scorers.bwd)
//   dp.<module>   comm      the module's DP gradient reduction (train/dp_grads.h:
//                           all-reduce in buckets, or ZeRO-1's reduce-scatter): the
//                           projector's right after the last llm task, the backbone's and
//                           scorers' after finish, the encoder's after its last backward;
//                           so the reductions overlap the rest of the backward.
// Under placements other than replicated the scorer tasks run on the `llm` stream: every
// task that communicates on the TP group is on that one stream, so all ranks post their
// TP collectives in the same order (MPI requires it); DP collectives are all on `comm`.
// Frozen modules (train.freeze): no dp task; the encoder's backward is skipped when it is
// frozen, the stage's when neither it nor the encoder trains (nothing upstream learns).
//
// Serial mode runs the same tasks in one fixed order on the calling thread, so on CPU
// serial and overlap give bitwise equal losses and gradients (each task's ops are the
// same, in the same order, on the same data).
#pragma once
#include <cstddef>
#include <vector>

#include "parallel/communicator.h"
#include "scheduler/graph.h"
#include "scheduler/streams.h"
#include "train/dp_grads.h"
#include "train/vlm_model.h"

namespace vlm {

struct StepOptions {
  sched::Mode mode = sched::Mode::Overlap;
};

class VlmStep {
 public:
  // trainable: one flag per model.modules() entry. `dp`: the DP reduction of the modules.
  VlmStep(VlmModel& model, sched::StreamSet& streams, DpGrads& dp, const std::vector<bool>& trainable,
          int micro_batches, const StepOptions& o);

  // Forward + backward of mbs (size = micro_batches) and the DP reduction. Returns the
  // sum of the micro-batches' losses on this rank (the step's mean loss is its DP sum,
  // given MicroBatch::loss_norm). Gradients are accumulated into the model's tables.
  double run(const std::vector<MicroBatch>& mbs, std::vector<sched::TaskTiming>* timings = nullptr);

  const sched::Graph& graph() const { return graph_; }
  int micro_batches() const { return M_; }
  // Bytes this rank sends over DP per step (DpGrads::bytes of the trainable modules).
  size_t dp_bytes() const { return dp_bytes_; }

 private:
  sched::Graph build();

  VlmModel& model_;
  sched::StreamSet& streams_;
  DpGrads& dp_;
  std::vector<bool> trainable_;
  int M_;
  StepOptions opt_;
  size_t dp_bytes_ = 0;
  const std::vector<MicroBatch>* mbs_ = nullptr;
  std::vector<double> losses_;
  sched::Graph graph_;
};

}  // namespace vlm

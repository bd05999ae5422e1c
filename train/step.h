// VlmStep: the forward and backward of one optimizer step (M micro-batches) of the VLM
// on one rank, as a task graph on the scheduler's named streams (scheduler/graph.h),
// then the DP gradient reduction in buckets on the `comm` stream.
//
// Front-end slots (VlmModel, model/front_slot.h): micro-batch m uses slot m % S, S =
// min(model.front_slots(), M). With S = 2 the front end of m+1 (load .. scorers.post)
// runs while the backbone runs m: it waits only for the backward tasks of m-1, the last
// readers of its slot. With S = 1 it waits for those of m (no pipelining).
//
// Tasks of micro-batch m (stream; dependencies besides the stream's own order):
//   load.m        vision    host -> device copy of the images, texture and prompts
//                           (after llm, vision.bwd, scorers.bwd and query.bwd of m-S)
//   vision.fwd.m  vision    encoder forward                          (after load.m)
//   query.m       llm       prompt embedding mean (TP all-reduce)    (after load.m)
//   scorers.pre.m scorer.0  the stage's inputs, encoder features     (after vision.fwd.m, query.m)
//   scorerK.m     scorer.K  scorer K's relevance map, K = 0, 1, 2: the three at once
//                                                                    (after scorers.pre.m)
//   scorers.post.m scorer.0 balancer, LOD allocation, visual tokens, the packed LM input
//                                                                    (after scorer0..2.m)
//   llm.m         llm       projector + backbone forward and backward; the loss into
//                           the step's device vector              (after scorers.post.m)
//                           (the last micro-batch's may be split, see below)
//   scorers.bwd.m scorer.0  stage backward -> dF, dquery             (after llm.m)
//   query.bwd.m   llm       prompt embedding gradient                (after scorers.bwd.m)
//   vision.bwd.m  vision    encoder backward                         (after scorers.bwd.m)
// The tasks are added front(0), then for each m: llm.m, [S = 2: front(m+1)], m's
// backward tasks, [S = 1: front(m+1)]; this order is each stream's (scheduler/graph.h),
// so with two slots the front end of m+1 precedes m's backward on every stream and
// runs during llm.m. Once per step:
//   finish        llm       TP-partial gradients of the backbone, the stage's placement
//                           traffic (after the last llm, query.bwd and scorers.bwd)
//   dp.<module>   comm      the module's DP gradient reduction (optim/dp_grads.h:
//                           all-reduce in buckets, or ZeRO-1's reduce-scatter): the
//                           projector's right after the last llm task, the backbone's and
//                           scorers' after finish, the encoder's after its last backward;
//                           so the reductions overlap the rest of the backward.
// The backbone's llm task in parts (DP > 1; same ops, same order on `llm`; the layer
// units, weight and gradient pools: nn/param_table.h, nn/param_layout.h):
//  - chunked (train.zero 0, the backbone trains): the last micro-batch's llm task is
//      llm.fwd.m     llm       projector + backbone forward, the loss   (after scorers.post.m)
//      llm.bwd<c>.m  llm       backward of layer chunk c, c = 0 the top one (with the loss
//                              and output head first), the last chunk also the embedding
//                              and projector; then the TP-partial gradients (finalize) of
//                              the chunk's layers (chunk 0: and the head's)  (after the previous)
//      dp.llm<c>     comm      all-reduce of chunk c's gradient range (DpGrads::reduce_range):
//                              the bottom layers' backward still runs  (after llm.bwd<c>.m)
//      dp.llm.embed  comm      the embedding's range, which query.bwd also adds to (after finish)
//    The chunks (layer_chunks): from the top, a chunk grows downwards while its gradients
//    fit in one train.bucket_mb bucket, at least one layer; the backbone's flat space is
//    [embedding][layer 0]..[layer L-1][head] (llm/backbone.h), so each chunk is one range
//    and the ranges cover it: the DP bytes are DpGrads::bytes. The comm order is
//    dp.llm0.., dp.projector (after the last chunk), dp.llm.embed, dp.scorers, dp.vision.
//  - layered (zero >= 2, the backbone trains): every micro-batch's backward is one task per
//    layer, llm.bwd<c>.m for layer L-1-c, which clears the layer's gradient pool slot,
//    runs the layer's backward and all-reduces the layer's TP-partial gradients over TP;
//    then on `comm`
//      dp.llm<c>.m   comm      reduce-scatter of the layer's gradients into this rank's
//                              shard (DpGrads::reduce_unit; micro-batch 0 writes it, the
//                              others add)                            (after llm.bwd<c>.m)
//    and llm.bwd<c>.m waits for the reduction of the slot's previous layer (two slots:
//    layer l+2's, or the previous micro-batch's). The embedding's and the head's gradients
//    stay resident: dp.llm reduces them once, after finish.
//  - gather (zero 3, with or without training the backbone): also the forward is one task
//    per layer, llm.fwd.m (projector, embedding), llm.f<l>.m, llm.head.m (final norm,
//    output layer, loss), and every layer's weights are all-gathered into their pool slot
//    before each use:
//      dp.llm.gather.f<l>.m  comm  before llm.f<l>.m; after the slot's previous reader
//      dp.llm.gather.b<l>.m  comm  before layer l's backward (l < L-1: the top layer's
//                                  weights are still in their slot from the forward)
//    Each gather is added before the previous layer's task, so `comm` runs it while that
//    layer computes: one layer ahead, as the two slots allow.
// Under ZeRO-1 a module's reduction is one dp.<module> task (reduce-scatter of its runs
// and their tails: optim/dp_grads.h), after finish.
// The encoder under zero >= 2 has no tasks of its own: its blocks are gathered (zero 3)
// and reduced inside vision.fwd.m and vision.bwd.m, block by block, by the hooks that
// DpGrads::attach gave it, over DP's duplicate communicator (so that the vision stream
// and `comm` each post in their own order); its embeddings and post norm are reduced by
// dp.vision as at zero 1. run() tells DpGrads a step begins (micro-batch 0's reduction of
// a block writes the shard, the others add).
// Host and device: the loss stays on the device during the step, and run() reads the M
// losses once, after every stream has finished. Host data goes to the device in each
// stream's order (copy_from_host: load, the LOD matrices, the packed LM input), so no
// copy waits for another stream. The one host read inside a step is by design:
// scorers.post.m reads micro-batch m's relevance (RelevanceStage::forward_finish), since
// the LOD allocation decides its token counts and so the backbone's shapes. It waits for
// `scorer.0`'s work only. On CUDA the tasks are issued in the order above, so when the
// host waits there for the front end of m+1, llm.m is already queued and the backbone
// keeps the GPU busy. Nothing is allocated inside a step: the buffers are planned at
// construction; the relevance stage's scratch (scorers/scratch.h) is sized by the first
// step, and its token buffers are reserved for the largest token count.
// Under a placement that communicates (RelevanceStage::scorers_apart() false: every
// placement but replicated at tp > 1) the scorer tasks run on the `llm` stream: every
// task that communicates on the TP group is on that one stream, so all ranks post their
// TP collectives in the same order (MPI requires it); DP collectives are all on `comm`.
// In overlap mode at tp > 1 the backbone's column-parallel layers post their input-
// gradient reduction on a side stream `tp` (high priority on CUDA) and compute their
// weight gradients meanwhile, joining before the next op (nn/tp_side.h); the order of
// the TP collectives is unchanged, and the side stream's work lies inside the llm tasks
// (it has no track in the trace).
// Frozen modules (train.freeze): no dp task; the encoder's backward is skipped when it is
// frozen, the stage's when neither it nor the encoder trains (nothing upstream learns).
//
// Serial mode runs the same tasks in one fixed order on the calling thread, so on CPU
// serial and overlap give bitwise equal losses and gradients (each task's ops are the
// same, in the same order, on the same data; every gradient is accumulated by the tasks
// of one stream, whose order is the serial order).
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

#include "model/vlm_model.h"
#include "nn/tp_side.h"
#include "optim/dp_grads.h"
#include "parallel/communicator.h"
#include "scheduler/graph.h"
#include "scheduler/streams.h"

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
  int front_slots() const { return slots_; }  // S above
  // Bytes this rank sends over DP per step (DpGrads::bytes of the trainable modules).
  size_t dp_bytes() const { return dp_bytes_; }
  // The visual tokens of each micro-batch of the last run (its LOD allocation, this rank).
  const std::vector<int64_t>& visual_tokens() const { return visual_; }
  // TP collectives posted on the side stream so far (0 without one: see above).
  int64_t side_collectives() const { return tp_side_ ? tp_side_->forks() : 0; }

 private:
  sched::Graph build();
  // The backbone's layers in chunks [l0, l1), from the top (the last micro-batch's
  // llm.bwd<c> tasks and their dp.llm<c> reductions, see above).
  std::vector<std::pair<int, int>> layer_chunks() const;

  VlmModel& model_;
  sched::StreamSet& streams_;
  DpGrads& dp_;
  std::vector<bool> trainable_;
  int M_;
  StepOptions opt_;
  int slots_;
  size_t dp_bytes_ = 0;
  const std::vector<MicroBatch>* mbs_ = nullptr;
  Tensor losses_;                   // [M] f32 on the device: micro-batch m's loss
  std::vector<float> losses_host_;  // [M] staging of the read after the graph
  std::vector<int64_t> visual_;     // [M] set by scorers.post.m
  std::unique_ptr<Stream> tp_stream_;  // overlap mode at tp > 1: the side stream `tp`
  std::unique_ptr<TpSide> tp_side_;
  sched::Graph graph_;
};

}  // namespace vlm

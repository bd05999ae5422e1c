// DpGrads: the data-parallel side of training: the reduction of the trainable modules'
// gradients over the DP group and, under ZeRO (train.zero >= 1), the all-gathers that
// rebuild the compute copies from the owners' master weights. What each DP rank owns,
// and where every storage lives, is each table's layout (nn/param_layout.h: the one
// description of ownership; owned(i) and layout(i) give it per module, for the optimizer,
// the checkpoints and the planner). docs/training.md, "Sharded data parallelism".
//  - zero = 0: all-reduce (sum) of a module's whole flat gradient space over DP, in
//    buckets of bucket_mb, posted together then waited (reduce); or of sub-ranges of it
//    (reduce_range), each in buckets of at most bucket_mb.
//  - zero >= 1: per run of the layout, a reduce-scatter of the gradients into this rank's
//    block of the gradient shard (grad_shard(i): [owned] f32, laid out as the layout's
//    shard buffers) and an all-reduce of the tail (reduce: the resident runs, once per
//    step). After the optimizer has updated the owned master weights, gather_values
//    all-gathers every rank's block of each run into the resident compute copy: the f32
//    values (f32 form), or the bf16 copies (bf16 form: the masters converted, then
//    gathered in bf16, half the bytes); the tail is converted locally.
//  - zero >= 2: the pooled units' gradients (the backbone's layers) live in two slots;
//    reduce_unit reduce-scatters one unit's into the shard after each micro-batch's
//    backward of it (the first micro-batch writes the shard, later ones add to it).
//  - zero 3: the pooled units' compute copies are not resident either: gather_unit
//    all-gathers one unit's from the owners (their masters converted to the compute
//    dtype, or a frozen table's owned compute values) into its pool slot, before each
//    forward and backward of it (train/step.h). Frozen modules are gathered, never
//    reduced.
// wire (train.grad_reduce_dtype): F32 (the default) reduces the f32 gradients as they
// are; BF16 converts them into a bf16 copy, reduces that (half the bytes; each reduction
// step rounds to bf16) and converts the sums back into f32 (the gradients at zero 0, the
// shard at zero >= 1). The optimizer always reads f32 gradients.
// The encoder (zero >= 2): its blocks are pooled units too, but it runs them itself on the
// vision stream (VisionEncoder::set_zero_hooks): attach() makes each block's gather
// (zero 3) and reduction (per micro-batch, a trainable encoder) hooks of the encoder,
// posted from that stream over a duplicate of the DP communicator (the comm
// stream's collectives and the vision stream's then keep each their own order), with
// staging buffers of their own. A block's fetch waits for its weights, prefetched by the
// fetch before it in the same pass, and posts the all-gather of the block the pass runs
// next (nn/stack.h LayerFetch: one block ahead, into the other slot, during this block's
// compute). The encoder's resident units (embeddings, post norm) are reduced with the
// others.
// Every rank must make the same calls for the same modules in the same order on the same
// stream kind (the step's `comm` tasks, the trainer's default stream; the encoder's
// blocks on the vision stream); the calls of one communicator run one at a time (their
// staging buffers are shared).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/vlm_model.h"
#include "parallel/communicator.h"

namespace vlm {

class DpGrads {
 public:
  // Only the modules whose `trainable` flag is set are reduced. `zero` must be the
  // sharding the tables were built with (VlmConfig::sharding; 0 over one DP rank).
  DpGrads(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, Communicator& dp, int zero,
          double bucket_mb, Backend& backend, DType wire = DType::F32);

  int zero() const { return zero_; }  // the stage in effect (0 over one DP rank)
  Communicator& dp() const { return dp_; }
  const ParamLayout& layout(size_t i) const { return modules_[i].table->layout(); }
  bool trainable(size_t i) const { return trainable_[i]; }

  // The resident runs of module i (every run up to zero 1; the non-pooled ones at zero >= 2).
  void reduce(Stream& s, size_t i);
  // zero = 0: all-reduces flat elements [begin, end) of module i only, in buckets of at
  // most bucket_elems() from begin. Disjoint ranges covering the space send the bytes of
  // reduce (the step reduces the backbone's layers this way as their gradients become
  // final, train/step.h).
  void reduce_range(Stream& s, size_t i, int64_t begin, int64_t end);
  // zero >= 2: pooled unit u of module i (its slot's gradients, complete for one micro-
  // batch): into the shard, overwriting it (first) or adding to it.
  void reduce_unit(Stream& s, size_t i, int u, bool first);
  // zero 3: pooled unit u of module i into its pool slot (any module, frozen or not).
  void gather_unit(Stream& s, size_t i, int u);
  // zero >= 1: every rank's updated blocks into the resident compute copies (after the
  // update), then the bf16 copies derived from resident f32 values (ParamTable::refresh_working).
  void gather_values(Stream& s, size_t i);
  // Attaches the DP group to `model` (whose modules these are); this object must outlive
  // the use. zero 3: the backbone fetches each layer's weights when it runs outside the
  // training step (evaluation, decoding: VlmModel::set_layer_fetch). zero >= 2: the
  // encoder's block hooks (see above; VlmModel::set_vision_hooks). A no-op below zero 2.
  // Required before a step at zero >= 2 (train/step.h checks it).
  void attach(VlmModel& model);
  bool attached() const { return attached_; }
  // The start of an optimizer step (the first reduction of each of the encoder's blocks
  // writes the shard, later ones add: VlmStep::run calls it).
  void begin_step();
  // The DP group's byte counters: its communicator's (every DP collective of the rank,
  // the trainer's host reductions included) and the encoder's duplicate's.
  CommCounters counters() const;
  // The elements of one bucket (bucket_mb at the wire's element size).
  int64_t bucket_elems() const;

  // Host copies for checkpoints and checks (not for the step): this rank's owned values
  // of module i, f32 [owned] in the layout's shard order (the masters, or what a frozen
  // module keeps: its compute copies, bf16 widened exactly); and the flat space [n] of
  // this TP rank rebuilt from every DP rank's owned elements `owned` (each run's blocks
  // all-gathered over DP, then its tail: a collective over DP, on stream s).
  std::vector<float> owned_values(size_t i) const;
  std::vector<float> gather_flat(Stream& s, size_t i, const std::vector<float>& owned) const;

  // This rank's reduced gradients of module i: [owned] f32 (zero >= 1), laid out as the
  // layout's shard buffers; zero 0: the table's resident gradients (the flat space).
  const Tensor& grad_shard(size_t i) const { return shard_[i]; }
  // Bytes this rank sends for module i (the byte counters' rule: reduce-scatter inputs,
  // tails and all-reduces at the wire's size, all-gather inputs at the compute dtype's):
  // reduce (per step), reduce_unit and gather_unit of unit u (per call), gather_values.
  size_t bytes(size_t i) const;
  size_t unit_bytes(size_t i, int u) const;
  size_t unit_gather_bytes(size_t i, int u) const;
  size_t gather_values_bytes(size_t i) const;
  DType wire() const { return wire_; }
  // Memory: the gradient shards; the bf16 wire copies and the reduce-scatters' output
  // staging; the all-gathers' input staging (of both communicators).
  size_t shard_bytes() const;
  size_t wire_bytes() const;
  size_t staging_bytes() const;

 private:
  // A communicator and the buffers its calls share.
  struct Lane {
    Communicator* comm = nullptr;
    Tensor wire_buf;  // bf16: the gradients of the largest reduction + a block
    Tensor acc;       // f32: a reduce-scatter's output before it is added (zero >= 2)
    Tensor stage;     // f32 (or bf16) the largest block: an all-gather's input
  };
  // The lane of module i's run r: the encoder's pooled runs go over the duplicate.
  Lane& lane(size_t i, const ShardRun& r) { return i == vision_ && r.pooled && front_comm_ ? front_ : main_; }
  // Reduce-scatter + tail all-reduce of run k's gradients `g` [size] into the shard
  // (add: accumulate into it).
  void reduce_run(Stream& s, size_t i, int k, const Tensor& g, bool add);
  // All-gather of run k's blocks into `out` [size] (compute dtype), the tail converted:
  // posted (its staged input at byte stage_at of the lane's staging buffer; null when
  // there is no block), or done.
  CommWork post_gather_run(Stream& s, size_t i, int k, const Tensor& out, int64_t stage_at);
  void gather_run(Stream& s, size_t i, int k, const Tensor& out);
  // gather_unit's all-gathers, posted.
  std::vector<CommWork> post_gather_unit(Stream& s, size_t i, int u);

  std::vector<ModuleParams> modules_;
  std::vector<bool> trainable_;
  Communicator& dp_;
  int zero_;
  double bucket_mb_;
  DType wire_ = DType::F32;
  std::vector<Tensor> shard_;  // per module: [owned] f32 (zero >= 1, trainable)
  size_t vision_ = SIZE_MAX;   // the encoder's module index
  std::unique_ptr<Communicator> front_comm_;
  Lane main_, front_;
  std::vector<char> fresh_;    // per encoder unit: not reduced since begin_step
  int prefetched_ = -1;        // the encoder unit whose all-gathers are in flight (prefetch_)
  std::vector<CommWork> prefetch_;
  bool attached_ = false;
};

}  // namespace vlm

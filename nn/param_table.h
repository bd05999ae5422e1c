// ParamTable: the parameters of a model as a table of (name, full shape, TP split dim
// or replicated, init), with this rank's local slices as views into the table's storage.
// Names are the owner's (llm/ uses Hugging Face names); nn/ layers bind their views by
// name (Linear::bind, Norm::bind), once, at construction.
//
// Layout (Hugging Face conventions, so safetensors map 1:1):
//   Linear weight  [out, in]  (y = x W^T + b);  bias [out]
//   split_dim 0 = rows   (column-parallel out features, vocab rows of embed/lm_head)
//   split_dim 1 = cols   (row-parallel in features)
//   split_dim -1 = replicated (every rank holds the whole tensor)
// Rank r of p holds rows/cols [r*n/p, (r+1)*n/p) of the split dimension.
// `full` is the shape across the TP group; `hf` is the Hugging Face shape, equal to
// `full` except for the vocabulary tables, whose rows are padded to a multiple of
// 128*tp: rows >= hf[0] are padding (zero, never looked up, masked out of the loss).
// `tp_partial_grad`: a replicated parameter whose per-rank gradient is a partial sum
// (norms/biases/positions on sequence shards under SP; replicated KV projections when
// NKV < tp); the owner all-reduces exactly these over the TP group (finalize_tp_grads):
// once per optimizer step, or per micro-batch for the pooled units' (train/step.h).
// Element type: f32, or f64 on CPU for gradient checks (the `dtype` of the table).
// Gradients accumulate (+=, nn/context.h); zero_grads() clears them.
// Mixed precision (train.precision=bf16, docs/training.md, "Numerics"): add_bf16_working_copy()
// before allocate() gives every matrix parameter (ndim >= 2) a bf16 compute copy
// (Param::work), which the matmuls read; vectors stay f32 only. A matrix that some
// consumer also reads in f32 (an embedding lookup: ParamSpec::f32_reads) keeps its f32
// values everywhere, and its bf16 copy is derived from them (refresh_working).
//
// Storage (nn/param_layout.h has the flat layout and the ownership of every ZeRO level):
// one flat element space per table, and storages that hold its runs at their flat
// offsets: resident f32 values (Param::value), resident bf16 copies (Param::work),
// resident gradients (Param::grad), this rank's shard of what is not resident (the
// owned master weights of a trainable table, or the owned compute values of a frozen
// pooled one: run(k).shard), and at zero >= 2 two pool slots for the pooled units'
// gradients and at zero 3 two for their compute copies (a pooled unit's Param views point
// into its slot: the k-th pooled unit uses slot k % 2, so that layer l+1's copy is
// gathered while layer l computes). Under ZeRO >= 1 a bf16-form parameter has no f32
// values (Param::value undefined): its master weights are the owners' shards. Every
// storage is allocated once, in allocate(); nothing is allocated afterwards.
// Values enter through write() (initialisation, imports, checkpoints), which places
// them wherever they live.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "nn/param_layout.h"
#include "parallel/communicator.h"

namespace vlm {

enum class InitKind { Normal, Zeros, Ones };

// The arithmetic of a model (train.precision, docs/training.md, "Numerics"): FP32, or BF16 mixed
// precision (a bf16 working copy of the weights, bf16 activations, f32 master weights,
// gradients and statistics). A model part built at BF16 calls add_bf16_working_copy().
enum class Precision { FP32, BF16 };

struct ParamSpec {
  std::string name;
  Shape full;                   // across the TP group (vocab rows padded)
  Shape hf;                     // Hugging Face shape (unpadded)
  int split_dim = -1;           // -1 replicated, else the dimension split over TP ranks
  InitKind init = InitKind::Normal;
  float std = 0.02f;            // for InitKind::Normal
  bool tp_partial_grad = false; // replicated, gradient partial per rank (see above)
  int layer = -1;               // the stack layer it belongs to (-1: outside the layers)
  bool f32_reads = false;       // a matrix some consumer reads in f32 (see above)
  bool no_decay = false;        // an embedding of positions, levels or texture channels:
                                // no weight decay, as vectors (optim/optimizer.h, decays)
};

// A spec with hf = full (the common case; vocabulary tables set hf afterwards).
ParamSpec param_spec(std::string name, Shape full, int split_dim, InitKind init, float std = 0.f,
                     bool tp_partial_grad = false);

struct Param {
  ParamSpec spec;
  Shape local;         // this rank's shape
  int64_t offset = 0;  // start of this rank's slice along spec.split_dim (0 if replicated)
  int64_t at = 0;      // its first element in the table's flat space (ParamLayout)
  int run = 0;         // the layout run that holds it
  Tensor value;        // f32 values (resident, or its pooled slot's), or undefined (see above)
  Tensor grad;         // gradients (resident, or its pooled slot's); undefined when frozen
  Tensor work;         // the bf16 compute copy (resident, or its pooled slot's), or undefined
};

// Where one run of the layout lives on this rank (each undefined when it is not held).
struct RunStorage {
  Tensor values;   // [size] f32 resident values: the compute copy of an f32-form run and the
                   // masters of every element at zero 0
  Tensor compute;  // [size] the compute copy: values (f32 form) or resident bf16 copies, or
                   // at zero 3 a pooled run's place in its unit's pool slot
  Tensor work;     // [size] resident bf16 copies (Param::work of its parameters), or undefined
  Tensor grad;     // [size] f32 gradients (resident, or the unit's gradient pool slot)
  Tensor shard;    // [owned] this rank's elements of a run without resident values: f32
                   // master weights (trainable), or compute values of a frozen pooled run
};

class ParamTable {
 public:
  // layer_units: the table's stack layers are units of the layout, pooled at zero >= 2
  // (nn/param_layout.h; the backbone's).
  ParamTable(std::vector<ParamSpec> specs, int tp, int tp_rank, DType dtype = DType::F32, bool layer_units = false);

  // Allocates every storage of the table on `b` (zero-filled). grads = false (a frozen
  // table): no gradients; every Param::grad is undefined, and the layers that bind them
  // skip their weight-gradient work (dW GEMMs, norm and embedding gradients) while still
  // passing activation gradients on. dp: the ZeRO level and DP group the storage is
  // sharded for (nn/param_layout.h).
  void allocate(Backend& b, bool grads = true, DpSharding dp = {});
  bool allocated() const { return allocated_; }

  const std::vector<Param>& params() const { return params_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const Param& get(const std::string& name) const;  // aborts if unknown
  int tp() const { return tp_; }
  int tp_rank() const { return tp_rank_; }
  DType dtype() const { return dtype_; }
  bool trains() const { return grads_on_; }
  const ParamLayout& layout() const { return layout_; }
  const RunStorage& run(int k) const { return runs_[size_t(k)]; }
  // Where this rank keeps the owned elements [b, e) of run k, at `shard_at` in the shard
  // buffers (ParamLayout::Piece): the run's shard when it has one, else its resident
  // values or compute copy (f32, or a bf16 copy). For checkpoints and checks.
  Tensor owned_view(int k, int64_t b, int64_t e, int64_t shard_at) const;

  // Writes this rank's slice `local` (host f32, shape p.local) of parameter p wherever it
  // lives: its f32 values, or its bf16 copy and this rank's owned elements of it.
  void write(const Param& p, const Tensor& local);

  // The bf16 working copy (see above): declared once, before allocate().
  void add_bf16_working_copy();
  bool has_working() const { return has_work_; }
  // work = bf16(value) for every run whose bf16 copy is derived from resident f32 values
  // (every copy at zero 0; under ZeRO the bf16-form parameters' copies are gathered from
  // the owners' masters: optim/dp_grads.h). After an optimizer step the copies are
  // already current (optim/optimizer.h): this is for new values (init, a checkpoint).
  void refresh_working(Stream& s);
  // The memory term of train.precision=bf16 (for plans, declared or not): exact bytes
  // of a bf16 working copy of this rank's matrices, 2 per element (as param_bytes(),
  // without the layout's padding).
  size_t bf16_copy_bytes() const;

  // Exact bytes of this rank's parameters: sum of local numel * dtype size.
  size_t param_bytes() const;
  // Memory of the storage, by kind: f32 values and shards; bf16 copies and shards;
  // gradients (resident and pooled); the pool of gathered compute copies (zero 3).
  size_t value_bytes() const;
  size_t working_bytes() const;
  size_t grad_bytes() const;
  size_t pool_bytes() const { return pool_.defined() ? pool_.nbytes() : 0; }
  // The resident storage (views of every held run in run order; at zero 0 the flat space).
  const Tensor& values() const { return values_; }
  const Tensor& grads() const { return grads_; }

  // Clears every gradient: the resident ones and the pool slots.
  void zero_grads();
  // Clears the gradient pool slot of pooled unit u (before its backward: train/step.h).
  void zero_unit_grads(Stream& s, int u);

  // Host f32 tensor of this rank's slice of `full_host` (shape spec.full or spec.hf;
  // rows beyond hf[0] read as 0).
  Tensor local_slice(const Param& p, const Tensor& full_host) const;
  // Sets the local value from a full host f32 tensor (shape spec.full or spec.hf).
  void set_full(const std::string& name, const Tensor& full_host);
  // All-reduces the gradients marked tp_partial_grad over `tp` (a no-op at size 1); with
  // a range, only those that start in elements [begin, end) of the flat space (disjoint
  // ranges covering it = the whole table, in the same order).
  void finalize_tp_grads(Stream& s, Communicator& tp, int64_t begin = 0, int64_t end = INT64_MAX);
  // Where p starts in the flat space, in elements (gradients, values and moments alike).
  int64_t grad_offset(const Param& p) const { return p.at; }

 private:
  Tensor pool_view(int k) const;  // pooled run k's place in its unit's compute pool slot

  int tp_ = 1, tp_rank_ = 0;
  DType dtype_ = DType::F32;
  bool layer_units_ = false, has_work_ = false, grads_on_ = false, allocated_ = false;
  std::vector<Param> params_;
  std::unordered_map<std::string, size_t> index_;
  ParamLayout layout_;
  Backend* backend_ = nullptr;
  Tensor values_, works_, grads_;    // resident storage
  Tensor shard_f32_, shard_bf16_;    // RunStorage::shard of every run that has one
  Tensor pool_, grad_pool_;          // two slots each (zero 3 / zero >= 2)
  int64_t slot_bytes_ = 0, grad_slot_ = 0;
  std::vector<RunStorage> runs_;
};

}  // namespace vlm

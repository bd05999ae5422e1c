// ParamTable: the parameters of a model as a table of (name, full shape, TP split dim
// or replicated, init), with this rank's local slices as views into one parameter arena
// and one gradient arena (same order, same shapes). Names are the owner's (llm/ uses
// Hugging Face names); nn/ layers bind their views by name (Linear::bind, Norm::bind).
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
// NKV < tp); the owner all-reduces exactly these over the TP group once per optimizer
// step (finalize_tp_grads).
// Element type: f32, or f64 on CPU for gradient checks (the `dtype` of the table).
// Gradients accumulate (+=, nn/context.h); zero_grads() clears them.
// Mixed precision (train.precision=bf16, docs/training.md, "Numerics"): add_bf16_working_copy()
// before allocate() declares a third arena, a bf16 copy of every matrix parameter
// (ndim >= 2: the weights matmuls read; vectors stay f32 only). Param::work views it
// (undefined for vectors and at fp32). refresh_working() re-rounds it from the f32
// master values: after init, a load, and every optimizer step. Master values and
// gradients stay in the table's dtype (f32).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/arena.h"
#include "core/backend.h"
#include "core/tensor.h"
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
};

// A spec with hf = full (the common case; vocabulary tables set hf afterwards).
ParamSpec param_spec(std::string name, Shape full, int split_dim, InitKind init, float std = 0.f,
                     bool tp_partial_grad = false);

struct Param {
  ParamSpec spec;
  Shape local;         // this rank's shape
  int64_t offset = 0;  // start of this rank's slice along spec.split_dim (0 if replicated)
  Tensor value;        // local view in the parameter arena
  Tensor grad;         // local view in the gradient arena
  Tensor work;         // local view in the bf16 working arena, or undefined (see above)
};

class ParamTable {
 public:
  ParamTable(std::vector<ParamSpec> specs, int tp, int tp_rank, DType dtype = DType::F32);

  // Allocates the parameter and gradient arenas on `b` (both zero-filled). grads = false
  // (a frozen table): no gradient arena; every Param::grad is undefined, and the layers
  // that bind them skip their weight-gradient work (dW GEMMs, norm and embedding
  // gradients) while still passing activation gradients on.
  void allocate(Backend& b, bool grads = true);
  bool allocated() const { return values_.allocated(); }

  const std::vector<Param>& params() const { return params_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const Param& get(const std::string& name) const;  // aborts if unknown
  int tp() const { return tp_; }
  int tp_rank() const { return tp_rank_; }
  DType dtype() const { return dtype_; }

  // The bf16 working copy (see above): declared once, before allocate().
  void add_bf16_working_copy();
  bool has_working() const { return has_work_; }
  // work = bf16(value) for every parameter with a working copy (no-op without one).
  void refresh_working(Stream& s);
  size_t working_bytes() const { return works_.allocated() ? works_.bytes() : 0; }
  // The memory term of train.precision=bf16 (for plans, declared or not): exact bytes
  // of a bf16 working copy of this rank's matrices, 2 per element (as param_bytes(),
  // without the arena's alignment padding, which working_bytes() includes).
  size_t bf16_copy_bytes() const;

  // Exact bytes of this rank's parameters: sum of local numel * dtype size.
  size_t param_bytes() const;
  const Arena& value_arena() const { return values_; }
  const Arena& grad_arena() const { return grads_; }
  size_t grad_bytes() const { return grads_.allocated() ? grads_.bytes() : 0; }  // 0 when frozen
  void zero_grads() {
    if (grads_.allocated()) grads_.zero();
  }

  // Host f32 tensor of this rank's slice of `full_host` (shape spec.full or spec.hf;
  // rows beyond hf[0] read as 0).
  Tensor local_slice(const Param& p, const Tensor& full_host) const;
  // Sets the local value from a full host f32 tensor (shape spec.full or spec.hf).
  void set_full(const std::string& name, const Tensor& full_host);
  // All-reduces the gradients marked tp_partial_grad over `tp` (a no-op at size 1); with
  // a range, only those that start in elements [begin, end) of the gradient arena
  // (disjoint ranges covering the arena = the whole table, in the same order).
  void finalize_tp_grads(Stream& s, Communicator& tp, int64_t begin = 0, int64_t end = INT64_MAX);
  // Where p's gradient starts in the gradient arena, in elements (p has a gradient).
  int64_t grad_offset(const Param& p) const;

 private:
  int tp_ = 1, tp_rank_ = 0;
  DType dtype_ = DType::F32;
  bool has_work_ = false;
  std::vector<Param> params_;
  std::unordered_map<std::string, size_t> index_;
  Arena values_{"params"}, grads_{"grads"}, works_{"params_bf16"};
};

}  // namespace vlm

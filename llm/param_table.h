// ParamTable: the parameters of the backbone as a table of (name, full shape, TP split
// dim or replicated, init), DESIGN.md section 5, with this rank's local slices as views
// into one parameter arena and one gradient arena (same order, same shapes).
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
// NKV < tp); Backbone::finalize_grads all-reduces exactly these over the TP group.
// Gradients accumulate (+=); zero_grads() clears them.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "core/arena.h"
#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

enum class InitKind { Normal, Zeros, Ones };

struct ParamSpec {
  std::string name;
  Shape full;                   // across the TP group (vocab rows padded)
  Shape hf;                     // Hugging Face shape (unpadded)
  int split_dim = -1;           // -1 replicated, else the dimension split over TP ranks
  InitKind init = InitKind::Normal;
  float std = 0.02f;            // for InitKind::Normal
  bool tp_partial_grad = false; // replicated, gradient partial per rank (see above)
};

struct Param {
  ParamSpec spec;
  Shape local;         // this rank's shape
  int64_t offset = 0;  // start of this rank's slice along spec.split_dim (0 if replicated)
  Tensor value;        // local view in the parameter arena (f32)
  Tensor grad;         // local view in the gradient arena (f32)
};

class ParamTable {
 public:
  ParamTable(std::vector<ParamSpec> specs, int tp, int tp_rank);

  // Allocates the parameter and gradient arenas on `b` (both zero-filled).
  void allocate(Backend& b);
  bool allocated() const { return values_.allocated(); }

  const std::vector<Param>& params() const { return params_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const Param& get(const std::string& name) const;  // aborts if unknown
  int tp() const { return tp_; }
  int tp_rank() const { return tp_rank_; }

  // Exact bytes of this rank's parameters (f32): sum of local numel * 4.
  size_t param_bytes() const;
  const Arena& value_arena() const { return values_; }
  const Arena& grad_arena() const { return grads_; }
  void zero_grads() { grads_.zero(); }

  // Host f32 tensor of this rank's slice of `full_host` (shape spec.full or spec.hf;
  // rows beyond hf[0] read as 0).
  Tensor local_slice(const Param& p, const Tensor& full_host) const;
  // Sets the local value from a full host tensor (shape spec.full or spec.hf).
  void set_full(const std::string& name, const Tensor& full_host);

 private:
  int tp_ = 1, tp_rank_ = 0;
  std::vector<Param> params_;
  std::unordered_map<std::string, size_t> index_;
  Arena values_{"params"}, grads_{"grads"};
};

}  // namespace vlm

// ActPlan: the activation arena of a model, declared buffer by buffer, in the spirit of
// llm.c's tensor-spec list. Each declaration reserves a buffer AND binds the struct
// field that will view it, in one line:
//   plan.add(&acts.ln1, Rows::Ts, {C});        // [Ts, C]
//   plan.add(&core.lse, Rows::T, {NHl});       // [T, NHl]
//   plan.alias(&acts.attn.x_full, &acts.ln1);  // the same memory, declared explicitly
// Sharing is explicit: an alias, or a struct planned once and used by several layers
// (recomputation: nn/activations.h). Nothing is looked up by name.
//
// Rows: a buffer's first dimension counts tokens, T (the TP regions) or Ts (the
// residual stream on this rank; nn/context.h), times `per_token` (e.g. [2T]), or is a
// fixed count (Rows::Fixed: `per_token` rows whatever the micro-batch, e.g. one chunk of
// the loss). The arena is allocated once for the maximum token counts; allocate() binds
// every field to its full buffer, then cut(T, Ts) re-binds every field to the first
// rows of its buffer for the current micro-batch (a no-op when T and Ts are unchanged;
// no string, no map, no allocation; fixed buffers keep their rows).
// Dtypes: an activation buffer (add) holds the arena's activation dtype, given to
// allocate(): f32, bf16 (train.precision=bf16: docs/training.md, "Numerics"), or f64 on
// CPU for gradient checks; an f32 buffer (add_f32: the statistics, i.e. norm mean/rstd,
// attention's lse, the loss's row statistics, and the f32 parts of a bf16 model, e.g.
// the convolutional stem) is f32, f64 in an f64 arena, so it stays f32 under bf16.
// Invariants: every bound field outlives the plan's use and never moves (the plan keeps
// its address: owners hold these structs in members that are not moved or resized
// after planning); declarations happen before allocate(). Buffers are 256-byte aligned;
// the arena is zero-filled at allocation.
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

class ActPlan {
 public:
  enum class Rows { T, Ts, Fixed };

  // Reserves an activation buffer [per_token * rows, inner...] and binds *field to it.
  void add(Tensor* field, Rows rows, Shape inner = Shape{}, int64_t per_token = 1);
  // The same for an f32 buffer (f64 in an f64 arena): see above.
  void add_f32(Tensor* field, Rows rows, Shape inner = Shape{}, int64_t per_token = 1);
  // Binds *field to the buffer of *source (already declared): same memory, same shape.
  void alias(Tensor* field, const Tensor* source);

  // One allocation for at most max_T / max_Ts tokens, activations of dtype `act`; binds
  // every field (uncut).
  void allocate(Backend& b, int64_t max_T, int64_t max_Ts, DType act = DType::F32);
  bool allocated() const { return storage_.defined(); }
  // Re-binds every field to the first rows of its buffer for T / Ts tokens.
  void cut(int64_t T, int64_t Ts);

  size_t bytes() const { return bytes_; }  // the arena's exact size (after allocate)
  size_t buffers() const { return buffers_.size(); }
  DType act_dtype() const { return act_; }  // after allocate

 private:
  struct Buffer {
    Rows rows;
    int64_t per_token;
    Shape inner;
    bool stat;
    Tensor full;  // the view at the maximum token count (after allocate)
  };
  void declare(Tensor* field, Rows rows, Shape inner, int64_t per_token, bool stat);
  int64_t rows_of(const Buffer& buf, int64_t T, int64_t Ts) const;
  struct Binding {
    Tensor* field;
    size_t buffer;
  };
  bool bound(const Tensor* field) const;  // declared already (plan time only)
  std::vector<Buffer> buffers_;
  std::vector<Binding> bindings_;
  Tensor storage_;  // u8[bytes_]
  size_t bytes_ = 0;
  int64_t T_ = -1, Ts_ = -1, max_T_ = 0, max_Ts_ = 0;
  DType act_ = DType::F32;
};

}  // namespace vlm

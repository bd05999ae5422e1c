// AdamW over the model's parameter tables, the global gradient norm and the learning-
// rate schedule of `vlm train`.
//  - State: first and second moments (f32) of the elements this rank owns (the layout of
//    each table, nn/param_layout.h: every element at zero 0, its blocks and the tails of
//    every run under ZeRO), for the trainable modules only; a frozen module has no
//    optimizer memory (state_bytes()). The update reads the reduced gradients
//    (DpGrads::grad_shard) and writes the owned master weights (the resident f32 values,
//    or the table's shard: RunStorage). It leaves the bf16 working copies current: the
//    same pass writes the copies of the elements it updates (the op's param_copy), and
//    under ZeRO step() ends by all-gathering the compute copies (DpGrads::gather_values,
//    which also derives the copies of the f32-form runs). No refresh_working after it.
//  - Weight decay (decays()): on matrices and convolution kernels; never on vectors (norm
//    weights, biases, default queries) nor on the position, level and texture embeddings,
//    which their modules mark (ParamSpec::no_decay).
//  - Gradient norm: sqrt of the sum of squares of every trainable parameter counted once
//    over TP x DP: a TP-split table's squares are summed over the TP group, a replicated
//    one's are taken from this rank (its gradient is the same on every TP rank); over DP
//    the reduced gradients are equal (zero 0), or each rank counts its blocks and DP rank
//    0 the tails, summed over DP (ZeRO).
//  - Schedule (lr_at): linear warmup from lr/warmup to lr over train.warmup steps, then
//    cosine or linear decay to lr * train.min_lr_ratio at the last step, or constant.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "model/vlm_model.h"
#include "nn/param_table.h"
#include "optim/dp_grads.h"
#include "parallel/communicator.h"

namespace vlm {

enum class LrSchedule { Cosine, Linear, Constant };
const char* schedule_name(LrSchedule s);

struct OptimOptions {
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup = 0;
  LrSchedule schedule = LrSchedule::Cosine;
  float weight_decay = 0.01f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float clip = 1.0f;  // max global grad norm; 0 = no clipping
};

// Learning rate of optimizer step `step` (1-based) of `total`.
double lr_at(const OptimOptions& o, int64_t step, int64_t total);
// Whether weight decay applies to a parameter (rule above).
bool decays(const ParamSpec& p);

class AdamW {
 public:
  // `modules` whose `trainable` flag is false are frozen (no state, never updated).
  // `dp` gives the elements each module's update covers and reduces them.
  AdamW(const std::vector<ModuleParams>& modules, const std::vector<bool>& trainable, DpGrads& dp, Backend& backend,
        const OptimOptions& o);

  // Global L2 norm of the gradients (rule above); collective over `tp`.
  double grad_norm(Stream& s, Communicator& tp);
  // One AdamW step at learning rate lr on every trainable parameter, gradients scaled by
  // grad_scale (clipping) first.
  void step(Stream& s, int64_t step, double lr, float grad_scale);

  size_t state_bytes() const { return state_bytes_; }
  // The moments (k = 0: m, 1: v) of module i (an index of `modules`): [owned] f32 laid out
  // as the layout's shard buffers (nn/param_layout.h; at zero 0 the flat space).
  // Undefined for a frozen module.
  Tensor moment(size_t i, int k) const;
  DpGrads& dp_grads() const { return dp_; }
  const OptimOptions& options() const { return opt_; }

 private:
  // A contiguous run of one parameter's elements that this rank updates.
  struct Slot {
    Tensor value, grad, m, v;
    Tensor copy;  // the resident bf16 compute copy of these elements, written by the update, or undefined
    bool split, decay;
    bool dp_replicated;  // a ZeRO tail: updated by every DP rank, counted once in the norm
  };
  OptimOptions opt_;
  DpGrads& dp_;
  std::vector<size_t> modules_;  // the trainable modules' indices
  std::vector<Tensor> state_;
  std::vector<Slot> slots_;
  size_t state_bytes_ = 0;
  Tensor sums_;  // [2]: squares of TP-split, of replicated gradients
};

}  // namespace vlm

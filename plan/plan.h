// `vlm plan`: a cluster run of `vlm train` planned on one machine, without MPI or a GPU
// (docs/planning.md). For a layout (tp, dp, micro-batches, recompute, placement) it
// gives every TP rank's exact device memory (train/memory_terms.h plan_rank), the
// exact bytes of the largest step per group (plan/plan_comm.h) and a modelled step time
// (plan/plan_time.h); it ranks every layout of the cluster that keeps the run's global
// batch (tp, micro-batches, ZeRO level 0-3, recompute, placement), those that fit in
// memory first, fastest first.
// The DP ranks of one TP rank hold the same memory (ZeRO's blocks have equal sizes and
// every rank keeps the tails: nn/param_layout.h), so ranks are planned per TP rank.
#pragma once
#include <string>
#include <vector>

#include "plan/plan_time.h"
#include "train/train_options.h"

namespace vlm {

struct PlanOptions {
  int nodes = 1, gpus_per_node = 8;
  std::string gpu = "h100";
  std::string interconnect = "ndr";
  double intra_gbs = 0, inter_gbs = 0;  // 0 = the GPU's NVLink / the interconnect's figure
  double reserve_gib = 1;               // per GPU, kept for the CUDA context and workspaces
  bool bf16 = false;                    // matmuls at the bf16 peak (else fp32)
  std::string op_table;                 // measured op rates (plan/plan_time.h), "" = roofline
  int world() const { return nodes * gpus_per_node; }
};

struct LayoutChoice {
  int tp = 1, dp = 1, micro_batches = 1, batch = 1;
  int zero = 0;  // train.zero
  Recompute recompute = Recompute::None;
  std::string placement = "replicated";  // scorers.placement
  std::string str() const;  // "tp=2 dp=4 micro=1 batch=8 zero=0 recompute=none placement=replicated"
};

struct LayoutPlan {
  LayoutChoice choice;
  VlmConfig cfg;                // the model at this layout
  std::vector<RankPlan> ranks;  // per TP rank
  StepShape shape;
  StepBytes bytes;              // rank 0's (every rank of a group moves the same)
  StepWork work;
  StepTime time;
  Links links;
  size_t usable = 0;            // device bytes per GPU minus the reserve
  std::string device;           // "an h100 (80 GiB less a 1 GiB reserve)"
  int max_rank = 0;             // the TP rank that needs the most memory
  size_t max_bytes() const { return ranks[size_t(max_rank)].memory.total(); }
  bool fits() const { return max_bytes() <= usable; }
  // Why it does not fit: "rank 1 needs 95.2 GiB, 16.2 GiB more than ...; activations ...".
  std::string overflow() const;
};

class Planner {
 public:
  // cfg: the run's options (every option of `vlm train` registered, plan.* read into o);
  // tok_vocab: the tokenizer's vocabulary size (0 = model.vocab_size must be set).
  Planner(const Config& cfg, const PlanOptions& o, int64_t tok_vocab);

  // The layout the options ask for (parallel.tp, train.*, model.recompute,
  // scorers.placement) on nodes x gpus_per_node; UserError when it cannot run there.
  LayoutChoice requested() const;
  LayoutPlan plan(const LayoutChoice& c) const;  // UserError when the model refuses c.tp
  // Every layout of the cluster with the run's global batch, ranked (fitting, then step
  // time, then memory); `skipped` gets one line per tp the model refuses.
  std::vector<LayoutPlan> ranked(std::vector<std::string>* skipped) const;

  const GpuSpec& gpu() const { return gpu_; }
  const PlanOptions& options() const { return o_; }
  int64_t global_batch() const { return global_batch_; }
  bool measured_rates() const { return !o_.op_table.empty(); }

 private:
  Links links(int tp, int dp) const;
  const Config& cfg_;
  PlanOptions o_;
  int64_t vocab_;
  TrainOptions train_;
  const GpuSpec& gpu_;
  OpRates rates_;
  int tp_ = 1;
  int64_t global_batch_ = 0;
};

}  // namespace vlm

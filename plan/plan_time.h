// The modelled time of one training step on a GPU kind (docs/planning.md):
// the only part of `vlm plan` that is an estimate (memory and bytes are exact).
//  - Compute: the step's matmul FLOPs at the GPU's peak (fp32 or bf16 dense tensor
//    peak, by precision) plus the other ops' memory traffic at its HBM bandwidth, each op
//    being bound by one of the two (a roofline summed over the step's ops). With a
//    measured op table (read_op_table) the measured rates replace the peaks.
//  - Communication: ring collectives over the group's link (bytes as counted, n ranks):
//    all_reduce 2(n-1)/n * b, all_gather (n-1) * b, reduce_scatter (n-1)/n * b,
//    broadcast b, divided by the link's bandwidth per GPU and direction. TP groups are
//    inside a node (NVLink); a DP group crosses nodes (InfiniBand) when it spans them.
//  - Step = compute + TP time (on the critical path: the llm stream waits for it) + the
//    exposed DP time, by part (StepBytes):
//      after the update (ZeRO >= 1: the compute copies' all-gathers): all exposed;
//      the pooled layers' (zero >= 2, 3; train/step.h): per micro-batch, the forward's
//        first gather, then each layer's gather beyond the previous layer's forward
//        compute; in the backward each layer's gather and the reduce-scatter of the layer
//        above beyond that layer's backward compute, and the last reduce-scatter; a layer's
//        forward compute is 1/3 of its share of the step (1/4 under full recomputation)
//        and its backward the rest;
//      the encoder's pooled blocks' (zero >= 2; inside its own tasks, prefetched one
//        block ahead): all exposed (neither that prefetch nor the vision stream's overlap
//        with the backbone is credited, as compute is summed over the streams);
//      the rest (zero 0's buckets, the once-per-step reduce-scatters): what exceeds the
//        last micro-batch's backward (about 2/3 of its compute).
// The figures of every GPU kind and their sources: docs/planning.md, "Figures".
#pragma once
#include <string>

#include "core/gpu_spec.h"
#include "plan/plan_comm.h"

namespace vlm {

// Inter-node links per GPU, GB/s per direction: "ndr" (InfiniBand NDR 400 Gb/s) 50,
// "hdr" (HDR 200 Gb/s) 25, "eth100" (100 GbE) 12.5; UserError otherwise.
double interconnect_gbs(const std::string& name);

// Measured rates replacing the roofline's peaks; 0 = not measured (the peak is used).
// CSV, one measured op per line, '#' comments, a header line allowed:
//   op,flops,bytes,seconds        op: gemm | attention | memory
// gemm and attention rates are sum(flops) / sum(seconds) of their lines, memory's is
// sum(bytes) / sum(seconds).
struct OpRates {
  double gemm_flops_s = 0, attention_flops_s = 0, memory_bytes_s = 0;
};
OpRates read_op_table(const std::string& path);  // UserError naming the file and line

// The work of one step on one rank: the model's FLOPs (model/work.h) and the memory
// traffic of everything else.
struct StepWork {
  double gemm_flops = 0, attention_flops = 0, model_flops = 0;  // ModelWork's
  double memory_bytes = 0;                                      // traffic of everything else
};
StepWork step_work(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s);

struct Links {
  double tp_gbs = 0, dp_gbs = 0;
  std::string tp_name, dp_name;  // "NVLink", "InfiniBand ndr"
};

struct StepTime {
  double compute_s = 0, tp_s = 0, dp_s = 0, dp_exposed_s = 0;
  double total() const { return compute_s + tp_s + dp_exposed_s; }
};
// bf16: the matmuls at the bf16 peak, else fp32. layers: the backbone's (the pooled
// units); full_recompute: model.recompute=full.
StepTime step_time(const StepWork& w, const StepBytes& b, const RankLayout& l, const GpuSpec& g, bool bf16,
                   const OpRates& rates, const Links& links, int micro_batches, int layers = 1,
                   bool full_recompute = false);

// Seconds of `c` on a ring of n ranks at gbs GB/s (the rule above).
double ring_seconds(const CommCounters& c, int n, double gbs);

}  // namespace vlm

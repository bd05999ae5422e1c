// The modelled time of one training step on a GPU kind (README "Planning (`vlm plan`)"):
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
//    DP time not hidden behind the last micro-batch's backward (about 2/3 of its compute).
// The figures of every GPU kind and their sources: README "Planning", "Figures".
#pragma once
#include <string>

#include "train/plan_comm.h"

namespace vlm {

struct GpuSpec {
  const char* name;
  double memory_gib;       // HBM capacity
  double fp32_tflops;      // dense FP32 (CUDA cores)
  double bf16_tflops;      // dense BF16 tensor cores (no sparsity)
  double hbm_gbs;          // HBM bandwidth, GB/s
  double nvlink_gbs;       // NVLink per GPU per direction, GB/s
};
// "h100" (SXM5 80 GB), "h200" (SXM 141 GB), "a100" (SXM4 80 GB); UserError otherwise.
const GpuSpec& gpu_spec(const std::string& name);
// The entry of a CUDA device by its name (cudaDeviceProp::name, as the backend's
// description holds it: "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, ...)"): a name with H100 ->
// h100, H200 -> h200 (GH200 too), A100 -> a100 (every A100 has the same peaks); null for
// any other GPU, and for the H100/H200 PCIe and NVL parts, whose peaks are lower than the
// SXM figures of the table.
const GpuSpec* gpu_spec_of_device(const std::string& device_name);

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

// The work of one step on one rank. FLOPs (2 per multiply-add) are those of the matmuls
// of the layers with weights (the backbone's q/k/v/o, MLP and output layer; the encoder's
// patch embedding or convolutional stem, texture map and blocks; the projector; the
// scorers' and the balancer's linears) and of attention (QK^T and PV; causal: half of
// the square). Per product: forward 1x, the input gradient 1x when something upstream
// trains, the weight gradient 1x when the module trains (the step skips the others:
// README "Training"; the encoder's first layer computes no pixel gradient). Not counted:
// the parameter-free products (LOD pooling, the largest: v/(12 d_v L_v) of the encoder's
// blocks, 0.4% for SigLIP-B/16 at 400 tokens; the perspectival box mean, the prompt
// query's mean, the participatory dot product, the balancer's mix) and elementwise ops.
// Attention is counted at the shape's mean sequence length (samples of different lengths
// run sum(n_i^2) >= B mean(n)^2).
struct StepWork {
  // What this rank executes (the time model): the replicated parts (encoder, projector,
  // scorers as placed, balancer) in full, recomputation, the vocabulary's padding columns.
  double gemm_flops = 0, attention_flops = 0;  // matmuls of the layers / of attention
  double memory_bytes = 0;                     // traffic of everything else
  // Model FLOPs (MFU, train/mfu.h): the FLOPs of the TP group's step divided by tp, each
  // product counted once: no recomputation, no replicated work (the encoder every TP rank
  // runs counts once per group), no padding (vocabulary, sequence parallelism).
  double model_flops = 0;
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
// bf16: the matmuls at the bf16 peak, else fp32.
StepTime step_time(const StepWork& w, const StepBytes& b, const RankLayout& l, const GpuSpec& g, bool bf16,
                   const OpRates& rates, const Links& links, int micro_batches);

// Seconds of `c` on a ring of n ranks at gbs GB/s (the rule above).
double ring_seconds(const CommCounters& c, int n, double gbs);

}  // namespace vlm

// The step-time model of `vlm plan` (train/plan_time.h).
#include "train/plan_time.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace vlm {

namespace {

// NVIDIA's datasheets (README "Planning", "Figures"): dense peaks, no sparsity.
const GpuSpec kGpus[] = {
    {"h100", 80, 67, 989.5, 3350, 450},   // H100 SXM5 80 GB: HBM3 3.35 TB/s, NVLink 4 900 GB/s both ways
    {"h200", 141, 67, 989.5, 4800, 450},  // H200 SXM 141 GB: HBM3e 4.8 TB/s, NVLink 4 900 GB/s both ways
    {"a100", 80, 19.5, 312, 2039, 300},   // A100 SXM4 80 GB: HBM2e 2.04 TB/s, NVLink 3 600 GB/s both ways
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

const GpuSpec& gpu_spec(const std::string& name) {
  for (const GpuSpec& g : kGpus)
    if (name == g.name) return g;
  throw UserError("--plan.gpu: expected h100, h200 or a100, got '" + name + "'");
}

double interconnect_gbs(const std::string& name) {
  if (name == "ndr") return 50;
  if (name == "hdr") return 25;
  if (name == "eth100") return 12.5;
  throw UserError("--plan.interconnect: expected ndr, hdr or eth100 (or set --plan.inter_gbs), got '" + name + "'");
}

OpRates read_op_table(const std::string& path) {
  std::ifstream in(path);
  VLM_REQUIRE(in.good(), path, ": cannot open the op table (--plan.op_table)");
  double f[3] = {0, 0, 0}, sec[3] = {0, 0, 0};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line.rfind("op,", 0) == 0) continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) c.push_back(trim(x));
    VLM_REQUIRE(c.size() == 4, path, ":", no, ": expected op,flops,bytes,seconds, got '", line, "'");
    const int k = c[0] == "gemm" ? 0 : c[0] == "attention" ? 1 : c[0] == "memory" ? 2 : -1;
    VLM_REQUIRE(k >= 0, path, ":", no, ": op '", c[0], "' (expected gemm, attention or memory)");
    double v[3];
    for (int i = 0; i < 3; ++i) {
      size_t used = 0;
      try {
        v[i] = std::stod(c[size_t(i + 1)], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      VLM_REQUIRE(used == c[size_t(i + 1)].size() && v[i] >= 0, path, ":", no, ": '", c[size_t(i + 1)],
                  "' is not a non-negative number");
    }
    VLM_REQUIRE(v[2] > 0, path, ":", no, ": seconds must be positive");
    f[k] += k == 2 ? v[1] : v[0];
    sec[k] += v[2];
  }
  OpRates r;
  if (sec[0] > 0) r.gemm_flops_s = f[0] / sec[0];
  if (sec[1] > 0) r.attention_flops_s = f[1] / sec[1];
  if (sec[2] > 0) r.memory_bytes_s = f[2] / sec[2];
  VLM_REQUIRE(sec[0] + sec[1] + sec[2] > 0, path, ": no measured op (lines op,flops,bytes,seconds)");
  return r;
}

StepWork step_work(const VlmConfig& cfg, const RankLayout& l, const RankPlan& r, const StepShape& s) {
  StepWork w;
  const ModelConfig& m = cfg.llm;
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  const double tp = l.tp, M = s.micro_batches, B = double(s.images), C = double(m.d_model), L = m.n_layers;
  const double HS = double(m.head_dim()), NH = m.n_heads, NKV = m.kv_heads(), F = double(m.d_ff);
  // Backbone: per token, per layer the q/k/v, o, and MLP matmuls; the output head.
  const double T = double(s.backbone_tokens(cfg, l.tp)), n = double(s.visual + s.text);
  const double layer = 2 * C * (NH * HS + 2 * NKV * HS) + 2 * C * C + (m.is_llama() ? 3 : 2) * 2 * C * F;
  const double head = 2 * C * double(m.padded_vocab(l.tp));
  const double fwd_mm = T * (L * layer + head) / tp, fwd_attn = B * L * 2 * n * n * C / tp;  // causal: half of 4 n^2 C
  const double passes = trains(ModuleId::Llm) ? 3 : 2;  // forward, input gradient, weight gradient
  const double re_mm = m.recompute == Recompute::Full ? T * L * layer / tp : 0;
  const double re_attn = m.recompute == Recompute::None ? 0 : fwd_attn;
  // Encoder (replicated; batch-split encodes ceil(B/tp) images per rank): patch embedding,
  // blocks with bidirectional attention; backward only when it trains.
  const VisionConfig& v = cfg.vision;
  const double imgs = cfg.scorers.scorers.placement == Placement::BatchSplit ? double((s.images + l.tp - 1) / l.tp) : B;
  const double N = double(v.tokens()), dv = double(v.d_model), Fv = double(v.d_ff), P = v.patch;
  const double venc = imgs * N * (2 * 3 * P * P * dv + v.n_layers * (2 * 4 * dv * dv + 2 * 2 * dv * Fv));
  const double vattn = imgs * v.n_layers * 4 * N * N * dv;
  const double vpass = trains(ModuleId::Vision) ? 3 : 1;
  // Projector (every visual token) and scorers (each parameter once per cell and image).
  const double Tv = B * double(s.visual);
  const double proj = Tv * 2 * (dv * C + C * C) * (trains(ModuleId::Projector) ? 3 : 2);
  const Placement pl = cfg.scorers.scorers.placement;
  const double share = pl == Placement::BatchSplit ? imgs / B : pl == Placement::Dedicated ? std::ceil(3.0 / tp) / 3 : 1;
  const double scor = 2 * double(r.scorer_params) * B * double(cfg.vision.grid() * cfg.vision.grid()) * share *
                      (trains(ModuleId::Scorers) ? 3 : 2);
  w.gemm_flops = M * (passes * fwd_mm + re_mm + vpass * venc + proj + scor);
  w.attention_flops = M * (3 * fwd_attn + re_attn + vpass * vattn);
  w.model_flops = M * (passes * fwd_mm + 3 * fwd_attn + vpass * (venc + vattn) + proj + scor);
  // Other traffic: every activation written once and read once per micro-batch, the
  // weights read by forward and both backward products, and AdamW's 7 f32 accesses
  // (read p, g, m, v; write p, m, v) per element this rank updates.
  w.memory_bytes = M * (2 * double(r.memory.activations) + 3 * double(r.memory.params));
  for (size_t i = 0; i < r.owned.size(); ++i)
    if (r.grad_elems[i] > 0) {
      const DpGrads::Owned& o = r.owned[i];
      w.memory_bytes += 28 * double((o.end - o.begin) + (o.tail_end - o.tail_begin));
    }
  return w;
}

double ring_seconds(const CommCounters& c, int n, double gbs) {
  if (n <= 1 || gbs <= 0) return 0;
  const double p = n, bw = gbs * 1e9;
  const double eff = 2 * (p - 1) / p * double(c.bytes_of(CollKind::AllReduce)) +
                     (p - 1) * double(c.bytes_of(CollKind::AllGather)) +
                     (p - 1) / p * double(c.bytes_of(CollKind::ReduceScatter)) + double(c.bytes_of(CollKind::Broadcast));
  return eff / bw;
}

StepTime step_time(const StepWork& w, const StepBytes& b, const RankLayout& l, const GpuSpec& g, bool bf16,
                   const OpRates& rates, const Links& links, int micro_batches) {
  StepTime t;
  const double peak = (bf16 ? g.bf16_tflops : g.fp32_tflops) * 1e12;
  const double gemm = rates.gemm_flops_s > 0 ? rates.gemm_flops_s : peak;
  const double attn = rates.attention_flops_s > 0 ? rates.attention_flops_s : peak;
  const double mem = rates.memory_bytes_s > 0 ? rates.memory_bytes_s : g.hbm_gbs * 1e9;
  t.compute_s = w.gemm_flops / gemm + w.attention_flops / attn + w.memory_bytes / mem;
  t.tp_s = ring_seconds(b.tp, l.tp, links.tp_gbs);
  t.dp_s = ring_seconds(b.dp, l.dp, links.dp_gbs);
  const double window = 2.0 / 3.0 * t.compute_s / std::max(1, micro_batches);
  t.dp_exposed_s = std::max(0.0, t.dp_s - window);
  return t;
}

}  // namespace vlm

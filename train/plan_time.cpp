// The step-time model of `vlm plan` (train/plan_time.h).
#include "train/plan_time.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "scorers/placement.h"
#include "vision/patch_embed.h"

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

const GpuSpec* gpu_spec_of_device(const std::string& device_name) {
  auto has = [&](const char* x) { return device_name.find(x) != std::string::npos; };
  if (has("A100")) return &gpu_spec("a100");
  if (has("PCIe") || has("NVL")) return nullptr;
  if (has("H200")) return &gpu_spec("h200");
  if (has("H100")) return &gpu_spec("h100");
  return nullptr;
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
  auto trains = [&](ModuleId id) { return !cfg.frozen[size_t(id)]; };
  // Passes of a product whose input gradient always runs (plan_time.h): 2, 3 when it trains.
  auto passes = [&](ModuleId id) { return trains(id) ? 3.0 : 2.0; };
  const double tp = l.tp, M = s.micro_batches, B = double(s.images);
  // Backbone (TP-split), per token: per layer q, o (NH heads), k, v (NKV heads) and the MLP;
  // the output layer. Heads and MLP columns are split over tp; with NKV < tp every rank
  // projects the one KV head it uses (nn/attention.h), which is replicated work.
  const ModelConfig& m = cfg.llm;
  const double C = double(m.d_model), L = m.n_layers, HS = double(m.head_dim()), NH = m.n_heads;
  const double NKV = m.kv_heads(), F = double(m.d_ff);
  const double q_o = 2 * 2 * C * NH * HS, kv = 2 * 2 * C * NKV * HS, mlp = (m.is_llama() ? 3 : 2) * 2 * C * F;
  const double layer_run = (q_o + mlp) / tp + (NKV >= tp ? kv / tp : kv / NKV), layer_model = (q_o + kv + mlp) / tp;
  const double head_run = 2 * C * double(m.padded_vocab(l.tp)) / tp, head_model = 2 * C * double(m.vocab_size) / tp;
  const double n = s.visual + s.text, T_run = double(s.backbone_tokens(cfg, l.tp)), T_model = B * n;
  const double llm_mm_run = T_run * (L * layer_run + head_run), llm_mm_model = T_model * (L * layer_model + head_model);
  const double attn = B * L * 2 * n * n * NH * HS / tp;  // causal: half of QK^T and PV's 2 x 2 n^2 NH HS
  const double re_mm = m.recompute == Recompute::Full ? T_run * L * layer_run : 0;
  const double re_attn = m.recompute == Recompute::None ? 0 : attn;
  // Encoder (replicated: every TP rank encodes every image, under every placement: README
  // "Training"; backward only when it trains): the embedding's own count (vision/
  // patch_embed.h: the patch convolution or the stem, the texture map), the blocks.
  const VisionConfig& v = cfg.vision;
  const PatchEmbed embed(v);
  const bool vtrain = trains(ModuleId::Vision);
  const double N = double(v.tokens()), dv = double(v.d_model), Fv = double(v.d_ff), Lv = v.n_layers;
  const double blocks = Lv * N * 2 * (4 * dv * dv + 2 * dv * Fv), vattn_fwd = Lv * 4 * N * N * dv;  // per image
  const double venc = B * (2 * embed.forward_macs_per_image() + (vtrain ? 3 : 1) * blocks +
                           (vtrain ? 2 * embed.backward_macs_per_image() : 0));
  const double vattn = B * (vtrain ? 3 : 1) * vattn_fwd;
  // Projector (replicated), every visual token.
  const double proj = B * s.visual * 2 * (dv * C + C * C) * passes(ModuleId::Projector);
  // Scorers per image (scorers/scorer.h): propositional and perspectival w1f, w1t, w2 and
  // participatory wf per cell, its wq per image; the balancer's v1s, v1q, v2 per image
  // (scorers/balancer.h), on every rank. Their backward runs when they or the encoder train.
  const double h = double(cfg.scorers.scorers.hidden), tex = double(kScorerTextureChannels);
  const double scorers = 2 * (N * (2 * h * (dv + tex + 1) + h * dv) + h * C), balancer = 2 * h * (9 + C + 3);
  const double spass = trains(ModuleId::Scorers) ? 3 : vtrain ? 2 : 1;
  const Placement pl = cfg.scorers.scorers.placement;
  const double share = pl == Placement::BatchSplit ? double(batch_split_slots(s.images, l.tp)) / B
                       : pl == Placement::Dedicated ? std::ceil(3.0 / tp) / 3
                       : pl == Placement::Tp2       ? 0.5  // each scorer's hidden width split over the pair
                                                    : 1.0;
  const double stage_run = B * (share * scorers + balancer) * spass, stage_model = B * (scorers + balancer) * spass;
  const double llm_passes = passes(ModuleId::Llm);
  w.gemm_flops = M * (llm_passes * llm_mm_run + re_mm + venc + proj + stage_run);
  w.attention_flops = M * (3 * attn + re_attn + vattn);
  w.model_flops = M * (llm_passes * llm_mm_model + 3 * attn + (venc + vattn + proj + stage_model) / tp);
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

// The step-time model of `vlm plan` (plan/plan_time.h).
#include "plan/plan_time.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "base/file_read.h"

namespace vlm {

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

double interconnect_gbs(const std::string& name) {
  if (name == "ndr") return 50;
  if (name == "hdr") return 25;
  if (name == "eth100") return 12.5;
  throw UserError("--plan.interconnect: expected ndr, hdr or eth100 (or set --plan.inter_gbs), got '" + name + "'");
}

OpRates read_op_table(const std::string& path) {
  std::stringstream in(read_file_bounded(path, uint64_t(16) << 20, "op table"));
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
    VLM_REQUIRE(v[k == 2 ? 1 : 0] > 0, path, ":", no, ": a ", c[0], " row measures ", k == 2 ? "bytes" : "flops",
                ", which must be positive");
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
  const ModelWork m = model_work(cfg, l.tp, s);
  w.gemm_flops = m.gemm_flops, w.attention_flops = m.attention_flops, w.model_flops = m.model_flops;
  const double M = s.micro_batches;
  // Other traffic: every activation written once and read once per micro-batch, the
  // weights read by forward and both backward products, and AdamW's 7 f32 accesses
  // (read p, g, m, v; write p, m, v) per element this rank updates.
  w.memory_bytes = M * (2 * double(r.memory.activations) + 3 * double(r.memory.params));
  for (size_t i = 0; i < r.layouts.size(); ++i)
    if (r.trains[i]) w.memory_bytes += 28 * double(r.layouts[i].owned());
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
                   const OpRates& rates, const Links& links, int micro_batches, int layers, bool full_recompute) {
  StepTime t;
  const double peak = (bf16 ? g.bf16_tflops : g.fp32_tflops) * 1e12;
  const double gemm = rates.gemm_flops_s > 0 ? rates.gemm_flops_s : peak;
  const double attn = rates.attention_flops_s > 0 ? rates.attention_flops_s : peak;
  const double mem = rates.memory_bytes_s > 0 ? rates.memory_bytes_s : g.hbm_gbs * 1e9;
  t.compute_s = w.gemm_flops / gemm + w.attention_flops / attn + w.memory_bytes / mem;
  t.tp_s = ring_seconds(b.tp, l.tp, links.tp_gbs);
  auto ring = [&](const CommCounters& c) { return ring_seconds(c, l.dp, links.dp_gbs); };
  t.dp_s = ring(b.dp);
  const double update = ring(b.dp_update), reduce = ring(b.dp_layer_reduce), gather = ring(b.dp_layer_gather);
  const double vision = ring(b.dp_vision);
  const double rest = std::max(0.0, t.dp_s - update - reduce - gather - vision);
  const int M = std::max(1, micro_batches), L = std::max(1, layers);
  // The pooled layers, per micro-batch (the rule above).
  const double fwd = full_recompute ? 0.25 : 1.0 / 3.0;
  const double cf = t.compute_s * fwd / (M * L), cb = t.compute_s * (1 - fwd) / (M * L);
  const double r = reduce / (M * L), gl = gather > 0 ? gather / (M * (2.0 * L - 1)) : 0.0;
  double layered = 0;
  if (gather > 0) layered += gl + (L - 1) * std::max(0.0, gl - cf);
  if (gather > 0 || reduce > 0) layered += (L - 1) * std::max(0.0, gl + r - cb) + r;
  const double window = 2.0 / 3.0 * t.compute_s / M;
  t.dp_exposed_s = update + M * layered + vision + std::max(0.0, rest - window);
  return t;
}

}  // namespace vlm

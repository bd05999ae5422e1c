// The time model of `vlm plan` (plan/plan_time.h) against hand-computed figures: ring
// collective times, the roofline with peaks and with a measured op table, the op
// table's refusals (one UserError naming the file and line), unknown GPU and link names;
// the backbone alone at bench_llm's shape (plan/plan_llm.h) against its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "plan/plan_llm.h"
#include "plan/plan_time.h"

namespace vlm {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string p = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(p) << text;
  return p;
}

TEST(PlanTime, RingCollectives) {
  CommCounters c;
  c.bytes[size_t(CollKind::AllReduce)] = 4000;
  c.bytes[size_t(CollKind::AllGather)] = 1000;
  c.bytes[size_t(CollKind::ReduceScatter)] = 8000;
  c.bytes[size_t(CollKind::Broadcast)] = 500;
  // n = 4 at 2 GB/s: 2*3/4*4000 + 3*1000 + 3/4*8000 + 500 = 6000 + 3000 + 6000 + 500 bytes.
  EXPECT_DOUBLE_EQ(ring_seconds(c, 4, 2), 15500 / 2e9);
  EXPECT_EQ(ring_seconds(c, 1, 2), 0.0) << "a group of one moves nothing";
}

TEST(PlanTime, RooflineAndMeasuredRates) {
  StepWork w;
  w.gemm_flops = 2e12, w.attention_flops = 1e12, w.memory_bytes = 4e9;
  StepBytes b;
  b.tp.bytes[size_t(CollKind::AllReduce)] = 900'000'000;  // 2*1/2*0.9 GB at 450 GB/s = 2 ms
  b.dp.bytes[size_t(CollKind::AllReduce)] = 1'000'000'000;  // 2*1/2*1 GB at 50 GB/s = 20 ms
  RankLayout l;
  l.tp = 2, l.dp = 2;
  Links k;
  k.tp_gbs = 450, k.dp_gbs = 50;
  const GpuSpec& g = gpu_spec("h100");
  const StepTime t = step_time(w, b, l, g, true, OpRates{}, k, 2);
  EXPECT_DOUBLE_EQ(t.compute_s, 3e12 / 989.5e12 + 4e9 / 3350e9);
  EXPECT_DOUBLE_EQ(t.tp_s, 0.002);
  EXPECT_DOUBLE_EQ(t.dp_s, 0.02);
  EXPECT_DOUBLE_EQ(t.dp_exposed_s, std::max(0.0, 0.02 - 2.0 / 3.0 * t.compute_s / 2));
  EXPECT_DOUBLE_EQ(t.total(), t.compute_s + t.tp_s + t.dp_exposed_s);
  const StepTime f = step_time(w, b, l, g, false, OpRates{}, k, 2);
  EXPECT_DOUBLE_EQ(f.compute_s, 3e12 / 67e12 + 4e9 / 3350e9) << "fp32 peak";

  const OpRates r = read_op_table(write("vlm_ops.csv", "# measured\nop,flops,bytes,seconds\n"
                                                       "gemm,1e12,0,2\ngemm, 3e12 ,0,2\nmemory,0,6e9,3\n"));
  EXPECT_DOUBLE_EQ(r.gemm_flops_s, 1e12);  // (1e12 + 3e12) / (2 + 2)
  EXPECT_DOUBLE_EQ(r.attention_flops_s, 0.0);
  EXPECT_DOUBLE_EQ(r.memory_bytes_s, 2e9);
  const StepTime m = step_time(w, b, l, g, true, r, k, 2);
  EXPECT_DOUBLE_EQ(m.compute_s, 2e12 / 1e12 + 1e12 / 989.5e12 + 4e9 / 2e9) << "attention keeps its peak";
}

TEST(PlanTime, Refusals) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string bad = write("vlm_ops_bad.csv", "gemm,1e12,0,1\nconv,1,1,1\n");
  EXPECT_NE(message([&] { read_op_table(bad); }).find("vlm_ops_bad.csv:2: op 'conv'"), std::string::npos);
  const std::string nan = write("vlm_ops_nan.csv", "gemm,lots,0,1\n");
  EXPECT_NE(message([&] { read_op_table(nan); }).find(":1: 'lots' is not a non-negative number"), std::string::npos);
  const std::string zero = write("vlm_ops_zero.csv", "gemm,1,0,0\n");
  EXPECT_NE(message([&] { read_op_table(zero); }).find("seconds must be positive"), std::string::npos);
  const std::string no_work = write("vlm_ops_no_work.csv", "op,flops,bytes,seconds\ngemm,0,0,1\n");
  EXPECT_NE(message([&] { read_op_table(no_work); }).find("vlm_ops_no_work.csv:2: a gemm row measures flops, which "
                                                          "must be positive"),
            std::string::npos);
  const std::string no_bytes = write("vlm_ops_no_bytes.csv", "memory,5,0,1\n");
  EXPECT_NE(message([&] { read_op_table(no_bytes); }).find(":1: a memory row measures bytes"), std::string::npos);
  EXPECT_NE(message([] { read_op_table("/nonexistent/ops.csv"); }).find("/nonexistent/ops.csv: cannot open op table"),
            std::string::npos);
  EXPECT_NE(message([] { gpu_spec("v100"); }).find("expected h100, h200 or a100"), std::string::npos);
  EXPECT_NE(message([] { interconnect_gbs("carrier-pigeon"); }).find("expected ndr, hdr or eth100"), std::string::npos);
  EXPECT_DOUBLE_EQ(interconnect_gbs("ndr"), 50);
}

// The ~1B Llama (configs/llama1b.cfg) at 1 x 2048 tokens in bf16 on an H100, by hand:
// matmul FLOPs 6 T (L (2C^2 + 2 C NKV HS + 3 C F) + V C), attention 3 L 2 n^2 NH HS (the
// causal half of QK^T and PV, forward and the two backward products), the memory
// traffic of plan_llm.h, each at its sustained rate.
TEST(PlanTime, BackboneAloneAgainstTheFormula) {
  ModelConfig m;
  m.family = ModelFamily::Llama, m.vocab_size = 32000, m.d_model = 2048, m.n_layers = 22, m.n_heads = 32;
  m.n_kv_heads = 4, m.d_ff = 5632, m.max_pos = 2048, m.tied_embeddings = false;
  const double T = 2048, C = 2048, L = 22, NH = 32, NKV = 4, HS = 64, F = 5632, V = 32000;
  const GpuSpec& g = gpu_spec("h100");
  const LlmStepPrediction p = predict_llm_step(m, 1, 2048, g, true);
  const double gemm = 6 * T * (L * (2 * C * C + 2 * C * NKV * HS + 3 * C * F) + V * C);
  const double attn = 3 * L * 2 * T * T * NH * HS;
  EXPECT_NEAR(p.gemm_flops / gemm, 1, 1e-12);
  EXPECT_NEAR(p.attention_flops / attn, 1, 1e-12);
  EXPECT_NEAR(p.model_flops / (gemm + attn), 1, 1e-12);
  const double per_layer = 4 * C + 6 * C + 2 * (NH + NKV) * HS + 3 * F;
  const double params = L * (2 * C * C + 2 * C * NKV * HS + 3 * C * F) + 2 * V * C;
  const double bytes = T * (3 * per_layer * 2 * L + 16 * V) + 34 * params;
  EXPECT_NEAR(p.memory_bytes / bytes, 1, 1e-12);
  const double peak = 989.5e12;
  const double t = gemm / (0.70 * peak) + attn / (0.35 * peak) + bytes / (0.80 * 3350e9);
  EXPECT_NEAR(p.total_s() / t, 1, 1e-12);
  EXPECT_NEAR(p.mfu, (gemm + attn) / (peak * t), 1e-12);
  EXPECT_GT(p.mfu, 0.3);  // what the figures give: matmul-bound, the target's neighbourhood
  EXPECT_LT(p.mfu, 0.7);
  // fp32: the fp32 peak and 4-byte activations.
  const LlmStepPrediction f = predict_llm_step(m, 1, 2048, g, false);
  EXPECT_NEAR(f.gemm_s, gemm / (0.70 * 67e12), 1e-12 * f.gemm_s);
}

}  // namespace
}  // namespace vlm

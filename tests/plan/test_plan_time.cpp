// The time model of `vlm plan` (plan/plan_time.h) against hand-computed figures: ring
// collective times, the roofline with peaks and with a measured op table, the op
// table's refusals (one UserError naming the file and line), unknown GPU and link names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
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
  EXPECT_NE(message([] { read_op_table("/nonexistent/ops.csv"); }).find("cannot open the op table"), std::string::npos);
  EXPECT_NE(message([] { gpu_spec("v100"); }).find("expected h100, h200 or a100"), std::string::npos);
  EXPECT_NE(message([] { interconnect_gbs("carrier-pigeon"); }).find("expected ndr, hdr or eth100"), std::string::npos);
  EXPECT_DOUBLE_EQ(interconnect_gbs("ndr"), 50);
}

}  // namespace
}  // namespace vlm

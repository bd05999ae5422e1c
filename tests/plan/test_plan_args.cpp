// `vlm plan` on its own (no training run to compare with; test_plan_cli.cpp has those):
//  - bad arguments exit 2 with one line: an unknown placement, tp2 with an odd tp, a
//    budget below the regions' count, a TP group larger than a node, a layout that does
//    not fit in memory (naming the term), no vocabulary size;
//  - the backbone alone (--plan.llm_seq, docs/planning.md, "The backbone alone"): the
//    printed step time, its parts, the model GFLOP and the MFU of configs/llama1b.cfg at
//    2048 tokens on an H100 equal plan/plan_llm.h's prediction to the printed digits, and
//    the printed MFU equals model FLOPs / (bf16 peak x printed step time).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "core/gpu_spec.h"
#include "plan/plan_llm.h"
#include "tests/support/cli.h"

namespace vlm {
namespace {

using test::vlm;
using Result = test::CommandResult;

std::string cfg() { return std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg"; }

class PlanArgs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = test::scratch_dir("plan_args"); }
  static inline std::string dir_;
};

TEST_F(PlanArgs, BadArgumentsExitTwoWithOneLine) {
  const std::string plan = vlm() + " plan --config " + cfg() + " --model.vocab_size 300 ";
  struct Case {
    std::string args, what;
  };
  const std::vector<Case> cases = {
      {"--scorers.placement nowhere", "--scorers.placement: 'nowhere' is not one of"},
      {"--scorers.placement tp2 --tp 1", "tp2 needs an even parallel.tp"},
      {"--lod.budget 2", "lod.budget=2"},
      {"--tp 4 --gpus-per-node 2", "a TP group never spans nodes"},
      {"--nodes 3 --gpus-per-node 1 --train.global_batch 8", "train.global_batch=8 must equal dp"},
      // Beyond any address space: the planner cannot even reserve the arenas it measures.
      {"--model.d_model 262144 --model.n_layers 4096 --model.d_ff 262144 --model.vocab_size 16777216",
       "of address space to plan an arena (more than a process can address"},
      {"--gpus-per-node 2 --tp 2 --model.d_model 8192 --model.n_layers 40 --model.n_heads 64 --model.d_ff 28672",
       "does not fit: TP rank"},
  };
  for (const Case& c : cases) {
    const Result r = test::run_command(plan + c.args, dir_);
    test::expect_one_error_line(r, "vlm plan", c.what);
  }
  const Result big = test::run_command(plan + cases.back().args, dir_);
  EXPECT_NE(big.err.find("its largest term is optimizer state"), std::string::npos) << big.err;
  EXPECT_NE(big.out.find("recommended layouts"), std::string::npos) << "the ranking comes before the refusal";
  test::expect_one_error_line(test::run_command(vlm() + " plan --config " + cfg(), dir_), "vlm plan",
                              "vlm plan needs the vocabulary size");
}

TEST_F(PlanArgs, BackboneAlonePrintsTheModelledStepAndMfu) {
  const std::string config = std::string(VLM_SOURCE_DIR) + "/configs/llama1b.cfg";
  const Result r = test::run_command(
      vlm() + " plan --config " + config + " --nodes 1 --gpus-per-node 1 --gpu h100 --plan.llm_seq 2048", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch m;
  const std::regex line(
      "batch 1 x seq 2048, bf16 on one h100 .*\\n  modelled step ([0-9.]+) ms = matmul ([0-9.]+) \\+ attention "
      "([0-9.]+) \\+ memory ([0-9.]+) ms; ([0-9.e+]+) model GFLOP; MFU ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(r.out, m, line)) << r.out;
  const double step_ms = std::stod(m[1]), gemm_ms = std::stod(m[2]), attn_ms = std::stod(m[3]);
  const double mem_ms = std::stod(m[4]), gflop = std::stod(m[5]), mfu = std::stod(m[6]);
  // The prediction for the config's backbone (TinyLlama-1.1B's shape), in bf16.
  ModelConfig mc;
  mc.family = ModelFamily::Llama, mc.vocab_size = 32000, mc.d_model = 2048, mc.n_layers = 22, mc.n_heads = 32;
  mc.n_kv_heads = 4, mc.d_ff = 5632, mc.max_pos = 2048, mc.tied_embeddings = false;
  const GpuSpec& g = gpu_spec("h100");
  const LlmStepPrediction p = predict_llm_step(mc, 1, 2048, g, true);
  EXPECT_NEAR(step_ms, 1e3 * p.total_s(), 0.006);  // printed with 2 decimals
  EXPECT_NEAR(gemm_ms, 1e3 * p.gemm_s, 0.006);
  EXPECT_NEAR(attn_ms, 1e3 * p.attention_s, 0.006);
  EXPECT_NEAR(mem_ms, 1e3 * p.memory_s, 0.006);
  EXPECT_NEAR(gflop / (p.model_flops / 1e9), 1, 1e-3);  // 4 significant digits
  EXPECT_NEAR(mfu, 100 * p.mfu, 0.051);
  // The printed figures against each other: MFU = model FLOPs / (peak x step).
  EXPECT_NEAR(mfu, 100 * gflop * 1e9 / (g.bf16_tflops * 1e12 * step_ms * 1e-3), 0.2);
  EXPECT_NEAR(step_ms, gemm_ms + attn_ms + mem_ms, 0.02);
}

}  // namespace
}  // namespace vlm

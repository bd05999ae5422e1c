// Golden test: a tiny GPT-2 and a tiny Llama/Qwen2 backbone (TP=1, f32 CPU) against
// PyTorch float64 references made by tools/make_llm_golden.py (tools/golden/*.bin):
// logits, loss and every parameter gradient, parameters loaded by HF name.
// Tolerances (max error relative to max(largest reference magnitude, 1e-3), per tensor):
// logits and loss 1e-5, gradients 1e-4.
#include <gtest/gtest.h>

#include <cstdio>

#include "golden_file.h"
#include "llm_test_util.h"

using namespace vlm;
using namespace vlm::test;

namespace {

std::vector<float> hf_part(const Tensor& t, const Shape& hf) {
  std::vector<float> v = to_vector_f32(t);
  v.resize(size_t(hf.numel()));  // padded vocabulary rows are the trailing ones
  return v;
}

void run_golden(const std::string& file) {
  const GoldenFile g(std::string(VLM_SOURCE_DIR) + "/tools/golden/" + file);
  ModelConfig c;
  c.family = g.config.at("family") == "llama" ? ModelFamily::Llama : ModelFamily::GPT2;
  c.vocab_size = int64_t(g.num("vocab_size"));
  c.d_model = int64_t(g.num("d_model"));
  c.n_layers = int(g.num("n_layers"));
  c.n_heads = int(g.num("n_heads"));
  c.n_kv_heads = int(g.num("n_kv_heads"));
  c.d_ff = int64_t(g.num("d_ff"));
  c.max_pos = int64_t(g.num("max_pos"));
  c.rope_theta = float(g.num("rope_theta"));
  c.norm_eps = float(g.num("norm_eps"));
  c.qkv_bias = g.num("qkv_bias") != 0;
  c.tied_embeddings = g.num("tied") != 0;
  auto comm = self_comm();
  Backend& cpu = cpu_backend();
  const auto& cu = g.at("input.cu_seqlens").i;
  Backbone bb(c, cpu, *comm, cu.back());
  for (const Param& p : bb.params().params()) {
    const GoldenTensor& t = g.at("param." + p.spec.name);
    bb.params().set_full(p.spec.name, Tensor::from_vector(t.f, Shape(t.dims)));
  }
  int n_golden_params = 0;
  for (const auto& kv : g.tensors) n_golden_params += kv.first.rfind("param.", 0) == 0;
  EXPECT_EQ(n_golden_params, int(bb.params().params().size())) << "parameter tables differ";

  LmInput in = make_lm_input(cpu, cu, g.at("input.ids").i, g.at("input.targets").i);
  Stream& s = cpu.default_stream();
  const float loss = bb.forward(s, in, true);
  const float ref_loss = g.at("output.loss").f[0];
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::fabs(ref_loss)) << file;
  const double e_logits = max_rel_err(to_vector_f32(bb.gather_logits(s)), g.at("output.logits").f);
  EXPECT_LT(e_logits, 1e-5) << file;
  bb.backward(s, in);
  double worst = 0;
  std::string worst_name;
  for (const Param& p : bb.params().params()) {
    const double e = max_rel_err(hf_part(p.grad, p.spec.hf), g.at("grad." + p.spec.name).f);
    EXPECT_LT(e, 1e-4) << file << " grad " << p.spec.name;
    if (e > worst) worst = e, worst_name = p.spec.name;
  }
  std::printf("[golden %s] loss %.7f (ref %.7f), logits max rel err %.2e, worst grad rel err %.2e (%s)\n",
              file.c_str(), loss, ref_loss, e_logits, worst, worst_name.c_str());
}

}  // namespace

TEST(LlmGolden, Gpt2) { run_golden("llm_gpt2.bin"); }
TEST(LlmGolden, Llama) { run_golden("llm_llama.bin"); }

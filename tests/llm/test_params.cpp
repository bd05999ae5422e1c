// Parameter table and model config (single process): per-rank parameter bytes equal
// 1/tp of the split tensors plus the replicated ones (formula from the config, not from
// the table), init values independent of tp and of the order, config validation and
// the `model.*` options.
#include <gtest/gtest.h>

#include "base/config.h"
#include "core/cpu_threads.h"
#include "llm/param_specs.h"
#include "llm_test_util.h"
#include "nn/init.h"

using namespace vlm;
using namespace vlm::test;

namespace {

// Expected bytes of one rank: split elements / tp + replicated elements, times 4.
size_t expected_bytes(const ModelConfig& c, int tp) {
  const int64_t C = c.d_model, HS = c.head_dim(), NH = c.n_heads, NKV = c.kv_heads(), F = c.d_ff, L = c.n_layers;
  const int64_t Vp = c.padded_vocab(tp);
  const bool gpt2 = !c.is_llama(), kv_rep = NKV < tp;
  int64_t split = Vp * C * (c.tied_embeddings ? 1 : 2);
  int64_t repl = gpt2 ? c.max_pos * C : 0;
  const int64_t kv = 2 * NKV * HS * C + (c.has_qkv_bias() ? 2 * NKV * HS : 0);
  split += L * (NH * HS * C + (c.has_qkv_bias() ? NH * HS : 0) + C * NH * HS + F * C * (gpt2 ? 1 : 2) +
                (gpt2 ? F : 0) + C * F);
  if (kv_rep) repl += L * kv; else split += L * kv;
  const int64_t norm = gpt2 ? 2 * C : C;
  repl += L * (2 * norm + (gpt2 ? 2 * C : 0)) + norm;
  return size_t(4 * (split / tp + repl));
}

}  // namespace

TEST(LlmParams, PerRankBytesAreSplitOverTpPlusReplicated) {
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama}) {
    const ModelConfig c = tiny_config(f);
    for (int tp : {1, 2, 4, 8}) {
      const auto specs = backbone_param_specs(c, tp);
      for (int r = 0; r < tp; ++r) {
        ParamTable t(specs, tp, r);
        EXPECT_EQ(t.param_bytes(), expected_bytes(c, tp)) << family_name(f) << " tp=" << tp << " rank " << r;
      }
    }
  }
}

TEST(LlmParams, InitIsTheSameFullTensorAtEveryTp) {
  const ModelConfig c = tiny_config(ModelFamily::Llama);
  ParamTable ref(backbone_param_specs(c, 1), 1, 0);
  ref.allocate(cpu_backend());
  init_params(ref, 7);
  for (int tp : {2, 8}) {
    for (int r = 0; r < tp; ++r) {
      ParamTable t(backbone_param_specs(c, tp), tp, r);
      t.allocate(cpu_backend());
      init_params(t, 7);
      for (const Param& p : t.params()) {
        const Param& q = ref.get(p.spec.name);
        std::vector<float> full = to_vector_f32(q.value);
        full.resize(size_t(q.spec.hf.numel()));
        const Tensor want = t.local_slice(p, Tensor::from_vector(full, q.spec.hf));
        EXPECT_EQ(to_vector_f32(p.value), to_vector_f32(want)) << p.spec.name << " tp=" << tp << " rank " << r;
      }
    }
  }
  // Order independence: a value depends only on (seed, name, index).
  EXPECT_EQ(init_value(7, "a", InitKind::Normal, 1.f, 5), init_value(7, "a", InitKind::Normal, 1.f, 5));
  EXPECT_NE(init_value(7, "a", InitKind::Normal, 1.f, 5), init_value(7, "b", InitKind::Normal, 1.f, 5));
  EXPECT_NE(init_value(7, "a", InitKind::Normal, 1.f, 5), init_value(8, "a", InitKind::Normal, 1.f, 5));
}

// Large tensors are drawn on several threads (nn/init.cpp): every element is still
// init_value of its index in the full tensor, whatever the thread count.
TEST(LlmParams, InitOfLargeTensorsIsElementwiseWhateverTheThreads) {
  const Shape full{700, 1536};  // 1.07M elements: 4 threads' worth
  for (int tp : {1, 2}) {
    ParamTable t({param_spec("w", full, 1, InitKind::Normal, 0.02f), param_spec("e", full, 0, InitKind::Normal, 0.5f)}, tp,
                 tp - 1);
    t.allocate(cpu_backend());
    for (int threads : {1, 4}) {
      ThreadBudgetScope budget(threads);
      init_params(t, 11);
      for (const Param& p : t.params()) {
        const std::vector<float> got = to_vector_f32(p.value);
        const int64_t cols = p.local[1];
        size_t wrong = 0;
        for (int64_t r = 0; r < p.local[0]; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t gr = r + (p.spec.split_dim == 0 ? p.offset : 0), gc = c + (p.spec.split_dim == 1 ? p.offset : 0);
            wrong += got[size_t(r * cols + c)] != init_value(11, p.spec.name, InitKind::Normal, p.spec.std, gr * full[1] + gc);
          }
        EXPECT_EQ(wrong, 0u) << p.spec.name << " tp " << tp << ", " << threads << " threads";
      }
    }
  }
}

TEST(LlmParams, ValidationNamesTheOption) {
  ModelConfig c = tiny_config(ModelFamily::Llama);
  EXPECT_THROW(c.validate(16), UserError);  // 8 heads over 16 ranks
  c.n_kv_heads = 3;
  try {
    c.validate(1);
    FAIL() << "n_kv_heads=3 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_kv_heads"), std::string::npos) << e.what();
  }
  ModelConfig g = tiny_config(ModelFamily::GPT2);
  g.d_ff = 66;
  EXPECT_THROW(g.validate(4), UserError);
  EXPECT_EQ(g.padded_vocab(1), 256);
  EXPECT_EQ(g.padded_vocab(8), 1024);
}

TEST(LlmParams, OptionsReadIntoModelConfig) {
  Config cfg("vlm");
  register_llm_options(cfg);
  const char* argv[] = {"vlm", "--model.family", "llama", "--model.n_kv_heads=2", "--model.recompute", "selective",
                        "--model.sequence_parallel"};
  ASSERT_TRUE(cfg.parse(7, argv));
  const ModelConfig m = read_model_config(cfg);
  EXPECT_EQ(m.family, ModelFamily::Llama);
  EXPECT_EQ(m.n_kv_heads, 2);
  EXPECT_EQ(m.recompute, Recompute::Selective);
  EXPECT_TRUE(m.sequence_parallel);
  EXPECT_FALSE(m.tied_embeddings);  // auto: llama untied
}

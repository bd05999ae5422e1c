// The backbone's KV-cache decoding (llm/backbone.h, nn/kv_cache.h) at world size N = 1,
// 2, 4, 8 (TP group = world), GPT-2 (learned positions, biases, LayerNorm) and Llama
// (RoPE, grouped-query heads split at tp 2 and replicated at 4, 8, QKV bias), SP off
// and on, recomputation none and full:
//  - prefill of three mixed samples [visual | prompt] (plus an SP padding sample that is
//    not kept), then decode steps feeding fixed tokens: the gathered logits of every
//    step equal the last-row logits of a full forward over the grown samples by the
//    same model at TP=1 (a size-1 communicator on every rank) within 1e-5 relative
//    to the largest logit; one sequence skips a step (finished early) and later ones
//    still match;
//  - a step's communication is the formula of backbone.h (all_reduce 4*N*C*(1+2L),
//    gather 4*N*Vl), and nothing else;
//  - a full sequence is refused (UserError), and so is a token outside the vocabulary.
#include <gtest/gtest.h>
#include <mpi.h>

#include "llm_test_util.h"
#include "tests/support/errors.h"

using namespace vlm;
using namespace vlm::test;

namespace {

constexpr int kSteps = 5;

std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int(uint32_t(seed >> 33) % 2001) - 1000) / 1000.f;
  }
  return v;
}

// The samples [visual | prompt | generated so far] and their visual rows' embeddings.
struct Samples {
  std::vector<VlmSample> s{{4, {11, 12, 13}, {}}, {0, {31, 32}, {}}, {6, {}, {}}};
  std::vector<float> visual;
};

// The input of `x`, padded for SP at tp with a text-only sample (not kept by prefill).
LmInput build(Backend& b, const ModelConfig& c, const Samples& x, int tp) {
  std::vector<VlmSample> v = x.s;
  int64_t T = 0, Tv = 0;
  for (const VlmSample& s : v) T += s.n_visual + int64_t(s.prompt.size() + s.caption.size()), Tv += s.n_visual;
  if (c.sequence_parallel && tp > 1)
    if (const int64_t pad = (tp - T % tp) % tp; pad > 0) v.push_back(VlmSample{0, std::vector<int32_t>(size_t(pad), 5), {}});
  const Tensor vis = Tensor::from_vector(std::vector<float>(x.visual.begin(), x.visual.begin() + Tv * c.d_model),
                                         Shape{Tv, c.d_model});
  return make_vlm_input(b, v, to_backend(b, vis));
}

// Row `row` of the full forward's gathered logits [T, V] of the reference model.
std::vector<float> full_row(Backbone& ref, const ModelConfig& c, const Samples& x, int64_t row) {
  Stream& s = cpu_backend().default_stream();
  ref.forward(s, build(cpu_backend(), c, x, 1));
  const std::vector<float> all = to_vector_f32(ref.gather_logits(s));
  return {all.begin() + row * c.vocab_size, all.begin() + (row + 1) * c.vocab_size};
}

void check_decode(ModelConfig c) {
  Backend& b = cpu_backend();
  Stream& s = b.default_stream();
  auto tp = world_comm();
  auto self = self_comm();
  const int p = tp->size();
  Backbone model(c, b, *tp, 64), ref(c, b, *self, 64);
  model.init(5);
  ref.init(5);
  model.plan_decoding(3, 16);
  Samples x;
  x.visual = values(10 * c.d_model, 99);
  model.prefill(s, build(b, c, x, p), 3);
  // Step 0 is the prefill; then every sequence gets tokens, but sequence 1 skips step 2.
  for (int step = 0; step <= kSteps; ++step) {
    std::vector<int32_t> seqs;
    if (step > 0) {
      std::vector<int32_t> ids;
      for (int32_t q = 0; q < 3; ++q) {
        if (q == 1 && step == 2) continue;
        const int32_t id = int32_t((17 * step + 29 * q) % c.vocab_size);
        x.s[size_t(q)].caption.push_back(id);
        seqs.push_back(q), ids.push_back(id);
      }
      tp->reset_counters();
      model.decode_step(s, seqs, ids);
      const CommCounters k = tp->counters();
      const int64_t N = int64_t(seqs.size()), C = c.d_model;
      EXPECT_EQ(k.bytes_of(CollKind::AllReduce), p > 1 ? uint64_t(4 * N * C * (1 + 2 * c.n_layers)) : 0u) << k.str();
      EXPECT_EQ(k.total_bytes(), k.bytes_of(CollKind::AllReduce)) << k.str();
    } else {
      seqs = {0, 1, 2};
    }
    tp->reset_counters();
    const std::vector<float> got = to_vector_f32(model.gather_step_logits(s));
    if (p > 1) {
      EXPECT_EQ(tp->counters().bytes_of(CollKind::AllGather), uint64_t(4 * seqs.size() * model.local_vocab()));
    }
    ASSERT_EQ(int64_t(got.size()), int64_t(seqs.size()) * c.vocab_size);
    for (size_t i = 0; i < seqs.size(); ++i) {
      int64_t row = -1;  // the last row of sequence seqs[i] in the unpadded packed batch
      for (int32_t q = 0; q <= seqs[i]; ++q)
        row += x.s[size_t(q)].n_visual + int64_t(x.s[size_t(q)].prompt.size() + x.s[size_t(q)].caption.size());
      const std::vector<float> want = full_row(ref, c, x, row);
      const std::vector<float> mine(got.begin() + int64_t(i) * c.vocab_size, got.begin() + int64_t(i + 1) * c.vocab_size);
      EXPECT_LE(max_rel_err(mine, want), 1e-5) << "step " << step << " sequence " << seqs[i];
    }
  }
  EXPECT_EQ(model.kv_cache()->len(0), 4 + 3 + kSteps);
  EXPECT_EQ(model.kv_cache()->len(1), 2 + kSteps - 1);
  EXPECT_GT(model.decode_bytes(), size_t(2 * c.n_layers * 3 * 16 * 4));
}

struct Case {
  ModelFamily family;
  bool sp;
  Recompute recompute;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << family_name(c.family) << (c.sp ? " sp " : " ") << recompute_name(c.recompute);
}

class Decode : public ::testing::TestWithParam<Case> {};

TEST_P(Decode, StepLogitsEqualTheFullForwardAtTp1) {
  ModelConfig c = tiny_config(GetParam().family);
  c.sequence_parallel = GetParam().sp;
  c.recompute = GetParam().recompute;
  check_decode(c);
}

INSTANTIATE_TEST_SUITE_P(Models, Decode,
                         ::testing::Values(Case{ModelFamily::GPT2, false, Recompute::None},
                                           Case{ModelFamily::GPT2, true, Recompute::Full},
                                           Case{ModelFamily::Llama, false, Recompute::Full},
                                           Case{ModelFamily::Llama, true, Recompute::Selective}),
                         [](const auto& info) {
                           return std::string(family_name(info.param.family)) + (info.param.sp ? "_sp_" : "_") +
                                  recompute_name(info.param.recompute);
                         });

TEST(DecodeErrors, FullSequenceAndBadTokenAreRefused) {
  Backend& b = cpu_backend();
  Stream& s = b.default_stream();
  auto tp = world_comm();
  const ModelConfig c = tiny_config(ModelFamily::Llama);
  Backbone model(c, b, *tp, 32);
  model.init(1);
  model.plan_decoding(2, 6);
  const LmInput in = make_lm_input(b, {0, 5, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {});
  model.prefill(s, in, 2);
  model.decode_step(s, {0}, {3});  // sequence 0 now holds 6 rows: full
  EXPECT_NE(error_of([&] { model.decode_step(s, {0}, {4}); }).find("sequence 0 is full"), std::string::npos);
  EXPECT_NE(error_of([&] { model.decode_step(s, {1}, {int32_t(c.vocab_size)}); }).find("outside the vocabulary"),
            std::string::npos);
  const LmInput longer = make_lm_input(b, {0, 7}, {1, 2, 3, 4, 5, 6, 7}, {});
  EXPECT_NE(error_of([&] { model.prefill(s, longer, 1); }).find("the cache holds 6 per sequence"), std::string::npos);
}

}  // namespace

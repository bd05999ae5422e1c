// Multi-rank tests of the backbone's mixed input (llm/lm_input.h: visual rows of caller
// embeddings + text rows of token ids, [visual | prompt | caption] per sample), run at
// world size N = 1, 2, 4, 8 (TP group = world), GPT-2 and Llama families, SP off and on:
//  - TP equivalence: loss, every gradient (each rank's slice) and d(visual) equal those
//    of the same model at TP=1 (every rank also runs it over a size-1 communicator)
//    within 1e-5 relative to the largest reference magnitude (f32 CPU); gradients that
//    are zero in exact arithmetic stay below 1e-6.
//  - The same batch through the embeddings path (visual rows + the table rows of the
//    text ids, assembled on the host) gives bitwise the same loss and d(visual); the
//    table's gradient differs exactly by the text rows' d(embeddings) added at their ids.
//  - Text only: samples without visual rows give bitwise the loss and gradients of the
//    token path with ids and caption-only targets written out by hand.
//  - Communication: the same bytes as the token path of the same T.
//  - make_vlm_input: rows, targets (caption tokens only), positions, refusals.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <map>

#include "llm_test_util.h"
#include "nn/init.h"
#include "tests/support/errors.h"

using namespace vlm;
using namespace vlm::test;

namespace {

constexpr double kTol = 1e-5;
// A gradient that is zero in exact arithmetic (the k_proj bias: a constant added to every
// key of a query leaves its softmax unchanged) is rounding noise, ~1e-8 in f32; it is
// checked to stay below this instead of relatively.
constexpr double kZeroGrad = 1e-6;

// T = 14 + 6 + 12 = 32 (a multiple of 8 for SP), Tv = 12; sample 1 is text only, sample
// 2 has no prompt.
std::vector<VlmSample> mixed_samples() {
  return {{5, {11, 12, 13}, {21, 22, 23, 24, 25, 26}}, {0, {31, 32}, {41, 42, 43, 44}}, {7, {}, {51, 52, 53, 54, 55}}};
}
std::vector<VlmSample> text_samples() {
  return {{0, {7, 8, 9}, {101, 102, 103, 104, 105}}, {0, {}, {111, 112, 113, 114, 115, 116, 117, 118}},
          {0, {121, 122, 123, 124, 125}, {131, 132, 133}}};  // T = 24
}
int64_t visual_rows(const std::vector<VlmSample>& v) {
  int64_t n = 0;
  for (const VlmSample& s : v) n += s.n_visual;
  return n;
}
std::vector<float> visual_values(int64_t rows, int64_t C) {
  std::vector<float> v(size_t(rows * C));
  uint64_t s = 777;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int(uint32_t(s >> 33) % 2001) - 1000) / 1000.f;
  }
  return v;
}

struct RunResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;  // local slices
  std::vector<float> d_emb;                         // d(visual) [Tv,C] or d(embeddings) [T,C]
  CommCounters counters;
};

RunResult finish(Backbone& bb, Communicator& comm, const LmInput& in, const Tensor& d_emb) {
  Stream& s = cpu_backend().default_stream();
  comm.reset_counters();
  RunResult r;
  r.loss = bb.forward(s, in, true);
  bb.backward(s, in, d_emb);
  bb.finalize_grads(s);
  r.counters = comm.counters();
  for (const Param& p : bb.params().params()) r.grads[p.spec.name] = to_vector_f32(p.grad);
  if (d_emb.defined()) r.d_emb = to_vector_f32(d_emb);
  return r;
}

RunResult run_mixed(const ModelConfig& c, Communicator& comm, const std::vector<VlmSample>& samples) {
  const int64_t Tv = visual_rows(samples);
  const Tensor vis = Tv ? Tensor::from_vector(visual_values(Tv, c.d_model), Shape{Tv, c.d_model}) : Tensor{};
  const LmInput in = make_vlm_input(cpu_backend(), samples, vis);
  Backbone bb(c, cpu_backend(), comm, in.n_tokens);
  bb.init(42);
  return finish(bb, comm, in, Tv ? Tensor::zeros(cpu_backend(), Shape{Tv, c.d_model}) : Tensor{});
}

// The samples' rows written out: ids (kVisualRowId on visual rows), caption-only targets.
void write_out(const std::vector<VlmSample>& samples, std::vector<int32_t>& cu, std::vector<int32_t>& ids,
               std::vector<int32_t>& targets) {
  cu = {0};
  for (const VlmSample& s : samples) {
    std::vector<int32_t> row_ids(size_t(s.n_visual), kVisualRowId), row_tg(size_t(s.n_visual), kIgnoreIndex);
    for (int32_t id : s.prompt) row_ids.push_back(id), row_tg.push_back(kIgnoreIndex);
    for (int32_t id : s.caption) row_ids.push_back(id), row_tg.push_back(kIgnoreIndex);
    // The row before each caption token predicts it.
    const size_t first = size_t(s.n_visual) + s.prompt.size();
    for (size_t k = 0; k < s.caption.size(); ++k)
      if (first + k >= 1) row_tg[first + k - 1] = s.caption[k];
    ids.insert(ids.end(), row_ids.begin(), row_ids.end());
    targets.insert(targets.end(), row_tg.begin(), row_tg.end());
    cu.push_back(cu.back() + int32_t(row_ids.size()));
  }
}

ModelConfig config(ModelFamily f, bool sp) {
  ModelConfig c = tiny_config(f);
  c.sequence_parallel = sp;
  return c;
}

const char* family(ModelFamily f) { return f == ModelFamily::GPT2 ? "gpt2" : "llama"; }

}  // namespace

TEST(MixedInput, BuilderRowsTargetsAndRefusals) {
  Backend& cpu = cpu_backend();
  const std::vector<VlmSample> v = mixed_samples();
  const Tensor vis = Tensor::from_vector(visual_values(12, 4), Shape{12, 4});
  const LmInput in = make_vlm_input(cpu, v, vis);
  EXPECT_TRUE(in.mixed());
  EXPECT_EQ(in.n_tokens, 32);
  EXPECT_EQ(in.n_visual, 12);
  EXPECT_EQ(in.max_seqlen, 14);
  EXPECT_EQ(in.n_counted, 6 + 4 + 5);  // caption tokens only
  EXPECT_EQ(to_vector_f32(in.cu_seqlens), (std::vector<float>{0, 14, 20, 32}));
  std::vector<float> rows;
  for (float r : {0, 1, 2, 3, 4, 20, 21, 22, 23, 24, 25, 26}) rows.push_back(r);
  EXPECT_EQ(to_vector_f32(in.visual_rows), rows);
  const std::vector<float> pos = to_vector_f32(in.positions), tg = to_vector_f32(in.targets);
  EXPECT_EQ(pos[13], 13.f);
  EXPECT_EQ(pos[14], 0.f);  // restarts per sample
  EXPECT_EQ(pos[20], 0.f);
  // Sample 0: rows 0-4 visual, 5-7 prompt, 8-13 caption; row 7 predicts caption[0].
  EXPECT_EQ(tg[6], float(kIgnoreIndex));
  EXPECT_EQ(tg[7], 21.f);
  EXPECT_EQ(tg[12], 26.f);
  EXPECT_EQ(tg[13], float(kIgnoreIndex));  // the last row predicts nothing
  // Sample 2 has no prompt: its last visual row (26) predicts the first caption token.
  EXPECT_EQ(tg[26], 51.f);
  EXPECT_EQ(tg[25], float(kIgnoreIndex));

  EXPECT_NE(error_of([&] { make_vlm_input(cpu, v, Tensor::from_vector(visual_values(11, 4), Shape{11, 4})); })
                .find("12 visual rows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { make_vlm_input(cpu, v, Tensor{}); }).find("undefined"), std::string::npos);
  EXPECT_NE(error_of([&] { make_vlm_input(cpu, {{0, {}, {}}}, Tensor{}); }).find("at least one row"),
            std::string::npos);
  EXPECT_NE(error_of([&] { make_vlm_input(cpu, {{-1, {1}, {2}}}, Tensor{}); }).find("n_visual >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { make_vlm_input(cpu, {{0, {1}, {-5}}}, Tensor{}); }).find("token id -5"),
            std::string::npos);
}

TEST(MixedInput, SameLossAndGradientsAsTp1) {
  auto self = self_comm();
  auto world = world_comm();
  const int tp = world->size(), rank = world->rank();
  double worst = 0;
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true}) {
      const std::string what = cat(family(f), sp ? " sp" : "", " tp=", tp, " rank ", rank);
      const ModelConfig c = config(f, sp);
      const RunResult ref = run_mixed(config(f, false), *self, mixed_samples());
      const RunResult got = run_mixed(c, *world, mixed_samples());
      const double el = std::fabs(double(got.loss) - ref.loss) / std::fabs(ref.loss);
      EXPECT_LT(el, kTol) << what << ": loss " << got.loss << " vs " << ref.loss;
      worst = std::max(worst, el);
      ParamTable t(backbone_param_specs(c, tp), tp, rank);
      for (const Param& p : t.params()) {
        std::vector<float> full = ref.grads.at(p.spec.name);
        full.resize(size_t(p.spec.hf.numel()));
        const std::vector<float> want = to_vector_f32(t.local_slice(p, Tensor::from_vector(full, p.spec.hf)));
        double ref_max = 0;
        for (float x : want) ref_max = std::max(ref_max, std::fabs(double(x)));
        if (ref_max < kZeroGrad) {  // zero in exact arithmetic: rounding noise on both sides
          for (float x : got.grads.at(p.spec.name)) EXPECT_LT(std::fabs(x), kZeroGrad) << what << " " << p.spec.name;
          continue;
        }
        const double e = max_rel_err(got.grads.at(p.spec.name), want);
        EXPECT_LT(e, kTol) << what << " grad " << p.spec.name;
        worst = std::max(worst, e);
      }
      const double e = max_rel_err(got.d_emb, ref.d_emb);
      EXPECT_LT(e, kTol) << what << " d(visual)";
      worst = std::max(worst, e);
      // The mixed input communicates what the token path of the same T does.
      std::vector<int32_t> cu, ids, targets;
      write_out(mixed_samples(), cu, ids, targets);
      for (int32_t& id : ids) id = std::max(id, 0);
      Backbone bb(c, cpu_backend(), *world, cu.back());
      bb.init(42);
      const RunResult tok = finish(bb, *world, make_lm_input(cpu_backend(), cu, ids, targets), Tensor{});
      for (CollKind k : {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter})
        EXPECT_EQ(got.counters.bytes_of(k), tok.counters.bytes_of(k)) << what << " " << coll_name(k);
    }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("[tp=%d] mixed input: worst relative error vs TP=1 %.2e (tolerance %.0e)\n", tp, worst, kTol);
}

TEST(MixedInput, EqualsTheEmbeddingsPathOfTheSameRows) {
  auto world = world_comm();
  const int tp = world->size();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true}) {
      const std::string what = cat(family(f), sp ? " sp" : "", " tp=", tp);
      const ModelConfig c = config(f, sp);
      const int64_t C = c.d_model, Tv = visual_rows(mixed_samples());
      const RunResult mixed = run_mixed(c, *world, mixed_samples());
      // The embeddings path: visual rows, and the full table's rows for the text ids.
      std::vector<int32_t> cu, ids, targets;
      write_out(mixed_samples(), cu, ids, targets);
      const int64_t T = cu.back();
      Backbone bb(c, cpu_backend(), *world, T);
      bb.init(42);
      const std::string table_name = "model.embed_tokens.weight";
      ParamTable full_table(backbone_param_specs(c, 1), 1, 0);
      full_table.allocate(cpu_backend());
      init_params(full_table, 42);
      const std::vector<float> table = to_vector_f32(full_table.get(table_name).value);
      const std::vector<float> vis = visual_values(Tv, C);
      std::vector<float> emb(size_t(T * C));
      for (int64_t t = 0, v = 0; t < T; ++t) {
        const bool visual = ids[size_t(t)] == kVisualRowId;
        for (int64_t j = 0; j < C; ++j)
          emb[size_t(t * C + j)] = visual ? vis[size_t(v * C + j)] : table[size_t(ids[size_t(t)] * C + j)];
        v += visual;
      }
      const RunResult ep = finish(bb, *world, make_lm_input(cpu_backend(), cu, {}, targets,
                                                            Tensor::from_vector(emb, Shape{T, C})),
                                  Tensor::zeros(cpu_backend(), Shape{T, C}));
      EXPECT_EQ(mixed.loss, ep.loss) << what;
      // d(visual) = the embeddings path's d(embeddings) at the visual rows.
      std::vector<float> want_dv;
      for (int64_t t = 0; t < T; ++t)
        if (ids[size_t(t)] == kVisualRowId)
          want_dv.insert(want_dv.end(), ep.d_emb.begin() + t * C, ep.d_emb.begin() + (t + 1) * C);
      EXPECT_TRUE(mixed.d_emb == want_dv) << what;
      // Every other gradient is the same; the table's gains the text rows at their ids.
      for (const auto& [name, g] : ep.grads) {
        if (name != table_name) {
          EXPECT_TRUE(g == mixed.grads.at(name)) << what << " " << name;
          continue;
        }
        std::vector<float> want = g;
        const Param& p = bb.params().get(name);
        for (int64_t t = 0; t < T; ++t) {
          const int64_t r = ids[size_t(t)] - p.offset;
          if (ids[size_t(t)] == kVisualRowId || r < 0 || r >= p.local[0]) continue;
          for (int64_t j = 0; j < C; ++j) want[size_t(r * C + j)] += ep.d_emb[size_t(t * C + j)];
        }
        EXPECT_LT(max_rel_err(mixed.grads.at(name), want), 1e-6) << what << " " << name;
      }
    }
}

TEST(MixedInput, TextOnlySamplesGiveExactlyTheTokenPath) {
  auto world = world_comm();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true}) {
      const ModelConfig c = config(f, sp);
      const RunResult mixed = run_mixed(c, *world, text_samples());
      std::vector<int32_t> cu, ids, targets;
      write_out(text_samples(), cu, ids, targets);
      Backbone bb(c, cpu_backend(), *world, cu.back());
      bb.init(42);
      const RunResult tok = finish(bb, *world, make_lm_input(cpu_backend(), cu, ids, targets), Tensor{});
      EXPECT_EQ(mixed.loss, tok.loss) << family(f) << (sp ? " sp" : "");
      EXPECT_GT(tok.loss, 0.f);
      for (const auto& [name, g] : tok.grads) EXPECT_TRUE(g == mixed.grads.at(name)) << family(f) << " " << name;
    }
}

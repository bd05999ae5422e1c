// Multi-rank tests of the backbone, run at world size N = 1, 2, 4, 8 (TP group = world):
//  - TP equivalence: the TP=N model (SP off and on; token ids and embeddings input)
//    gives the loss, every gradient (each rank's slice) and d(embeddings) of the same
//    model at TP=1 (computed on every rank with a size-1 communicator), within
//    kLossTol / kGradTol relative to the largest reference magnitude (f32 CPU).
//  - Recomputation none / selective / full: bitwise the same loss and gradients.
//  - A side stream for the input-gradient reductions (nn/tp_side.h): bitwise the same
//    loss and gradients, with one reduction per column-parallel layer posted there.
//  - Communication: bytes counted by the TP communicator in one forward + backward +
//    finalize_grads equal the analytic formula (derived in llm/backbone.h).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <map>

#include "llm_test_util.h"
#include "nn/tp_side.h"

using namespace vlm;
using namespace vlm::test;

namespace {

constexpr double kLossTol = 2e-6;
constexpr double kGradTol = 2e-5;

struct RunResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;  // local slices
  std::vector<float> d_emb;
  CommCounters counters;
  size_t act_bytes = 0;
};

RunResult run(const ModelConfig& c, Communicator& comm, const HostBatch& b, bool embeddings, TpSide* side = nullptr) {
  Backend& cpu = cpu_backend();
  Stream& s = cpu.default_stream();
  const int64_t T = b.cu.back();
  Backbone bb(c, cpu, comm, T);
  bb.init(42);
  bb.set_tp_side(side);
  Tensor emb, d_emb;
  if (embeddings) {
    emb = Tensor::from_vector(b.embeddings, Shape{T, c.d_model});
    d_emb = Tensor::zeros(cpu, Shape{T, c.d_model});
  }
  const LmInput in = make_lm_input(cpu, b.cu, embeddings ? std::vector<int32_t>{} : b.ids, b.targets, emb);
  comm.reset_counters();
  RunResult r;
  r.loss = bb.forward(s, in, true);
  bb.backward(s, in, d_emb);
  bb.finalize_grads(s);
  r.counters = comm.counters();
  for (const Param& p : bb.params().params()) r.grads[p.spec.name] = to_vector_f32(p.grad);
  if (embeddings) r.d_emb = to_vector_f32(d_emb);
  r.act_bytes = bb.activation_bytes();
  return r;
}

struct Case {
  ModelFamily family;
  bool sp;
  bool embeddings;
  std::string str() const {
    return cat(family_name(family), sp ? " sp" : "", embeddings ? " embeddings-input" : " token-ids");
  }
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true})
      for (bool e : {false, true}) v.push_back({f, sp, e});
  return v;
}

}  // namespace

TEST(LlmTp, SameLossAndGradientsAsTp1) {
  auto self = self_comm();
  auto world = world_comm();
  const int tp = world->size(), rank = world->rank();
  double worst_loss = 0, worst_grad = 0;
  for (const Case& k : cases()) {
    ModelConfig c = tiny_config(k.family);
    const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
    const RunResult ref = run(c, *self, b, k.embeddings);
    c.sequence_parallel = k.sp;
    const RunResult got = run(c, *world, b, k.embeddings);
    const double el = std::fabs(double(got.loss) - ref.loss) / std::fabs(ref.loss);
    EXPECT_LT(el, kLossTol) << k.str() << ": loss " << got.loss << " vs " << ref.loss;
    worst_loss = std::max(worst_loss, el);
    // Each rank's gradient slice against the same slice of the TP=1 gradient.
    ParamTable ref_t(backbone_param_specs(c, 1), 1, 0), t(backbone_param_specs(c, tp), tp, rank);
    for (const Param& p : t.params()) {
      std::vector<float> full = ref.grads.at(p.spec.name);
      full.resize(size_t(p.spec.hf.numel()));
      const std::vector<float> want = to_vector_f32(t.local_slice(p, Tensor::from_vector(full, p.spec.hf)));
      const double e = max_rel_err(got.grads.at(p.spec.name), want);
      EXPECT_LT(e, kGradTol) << k.str() << " grad " << p.spec.name << " tp=" << tp << " rank " << rank;
      worst_grad = std::max(worst_grad, e);
    }
    if (k.embeddings) {
      const double e = max_rel_err(got.d_emb, ref.d_emb);
      EXPECT_LT(e, kGradTol) << k.str() << " d_embeddings";
      worst_grad = std::max(worst_grad, e);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst_loss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &worst_grad, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("[tp=%d] worst loss rel err %.2e, worst gradient rel err %.2e (tolerances %.0e, %.0e)\n", tp,
                worst_loss, worst_grad, kLossTol, kGradTol);
}

TEST(LlmTp, RecomputeIsBitwiseTheSame) {
  auto world = world_comm();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama}) {
    for (bool sp : {false, true}) {
      ModelConfig c = tiny_config(f);
      c.sequence_parallel = sp;
      const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
      const RunResult none = run(c, *world, b, false);
      for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
        c.recompute = rc;
        const RunResult r = run(c, *world, b, false);
        EXPECT_EQ(r.loss, none.loss) << recompute_name(rc);
        for (const auto& [name, g] : none.grads)
          EXPECT_TRUE(g == r.grads.at(name)) << family_name(f) << " " << recompute_name(rc) << " " << name;
        EXPECT_LT(r.act_bytes, none.act_bytes) << recompute_name(rc);
      }
    }
  }
}

TEST(LlmTp, SideStreamIsBitwiseTheSame) {
  auto world = world_comm();
  Backend& cpu = cpu_backend();
  const std::unique_ptr<Stream> side_stream = cpu.create_async_stream("tp", AsyncStreamOptions{});
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama}) {
    for (bool sp : {false, true}) {
      ModelConfig c = tiny_config(f);
      c.sequence_parallel = sp;
      const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
      const RunResult plain = run(c, *world, b, true);
      TpSide side(cpu, *side_stream);
      const RunResult r = run(c, *world, b, true, &side);
      SCOPED_TRACE(cat(family_name(f), sp ? " sp" : ""));
      EXPECT_EQ(r.loss, plain.loss);
      for (const auto& [name, g] : plain.grads) EXPECT_TRUE(g == r.grads.at(name)) << name;
      EXPECT_TRUE(r.d_emb == plain.d_emb);
      EXPECT_EQ(r.counters.total_bytes(), plain.counters.total_bytes());
      // Per layer the q/k/v and the MLP's input regions: all on the side stream when
      // there is a group to reduce over. The output head's input region is reduced on the
      // main stream: its weight gradient ran in the training forward (the loss with the
      // head's chunking, llm/loss_parallel.h), so there is nothing left to hide it behind.
      EXPECT_EQ(side.forks(), world->size() > 1 ? 2 * c.n_layers : 0);
    }
  }
}

TEST(LlmTp, CommunicationBytesMatchTheFormula) {
  auto world = world_comm();
  const int64_t p = world->size();
  if (p == 1) GTEST_SKIP() << "no communication at TP=1";
  for (const Case& k : cases()) {
    ModelConfig c = tiny_config(k.family);
    c.sequence_parallel = k.sp;
    const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
    const RunResult r = run(c, *world, b, k.embeddings);
    // Formula (llm/backbone.h): f32 = 4 bytes, per step = forward + backward + finalize.
    const int64_t T = b.cu.back(), C = c.d_model, L = c.n_layers, HS = c.head_dim(), NKV = c.kv_heads();
    const int64_t E = k.embeddings ? 0 : 1, Ts = T / p;
    const bool gpt2 = k.family == ModelFamily::GPT2;
    // R: replicated KV weights (+ biases) when NKV < tp, all-reduced by finalize_grads.
    const int64_t R = NKV < p ? L * (2 * NKV * HS * C + (c.has_qkv_bias() ? 2 * NKV * HS : 0)) : 0;
    // S (SP only): norms, row-parallel biases and learned positions on sequence shards.
    const int64_t S = gpt2 ? L * 6 * C + 2 * C + c.max_pos * C : L * 2 * C + C;
    uint64_t ar, ag = 0, rs = 0;
    if (!k.sp) {
      // embedding fwd (E) + 2 fwd + 2 bwd all-reduces per block + lm_head input bwd,
      // loss: max [T] + (sumexp, target logit) [2T].
      ar = uint64_t(4 * (T * C * (E + 4 * L + 1) + 3 * T + R));
    } else {
      // every all-reduce of [T,C] becomes a reduce-scatter (input [T,C]) or an
      // all-gather (input [Ts,C]); the embedding/input gradient is all-gathered in
      // backward for both input paths.
      rs = uint64_t(4 * T * C * (E + 4 * L + 1));
      ag = uint64_t(4 * Ts * C * (4 * L + 2));
      ar = uint64_t(4 * (3 * T + R + S));
    }
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllReduce), ar) << k.str() << " " << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllGather), ag) << k.str() << " " << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::ReduceScatter), rs) << k.str() << " " << r.counters.str();
    if (world->rank() == 0)
      std::printf("[tp=%lld] %s: %s\n", (long long)p, k.str().c_str(), r.counters.str().c_str());
  }
}

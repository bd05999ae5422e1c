// Every placement (scorers/placement.h) against the replicated one computed on this rank
// alone (TP=1): the same tokens, the same loss, the same gathered gradients (scorer,
// balancer and LOD parameters after finalize_grads, features, query) to 1e-5 relative,
// at TP = the mpirun size (1, 2, 4, 8); the bytes each placement's collectives count
// equal its formula, per kind. tp2 runs where the size is even, on pairs of ranks. The
// same with the LOD mechanisms of docs/scorers.md (lod.order=depth, lod.gate=detail,
// exploration with probability 0.5).
#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "scorers/stage.h"
#include "tests/scorers/scorer_test_util.h"
#include "tests/support/metrics.h"
#include "tests/support/mpi.h"

namespace vlm::test {
namespace {

constexpr int64_t kB = 5;  // not a multiple of tp: padded slots (and idle ranks at tp=8)
const std::vector<bool> kPrompt{true, false, true, true, false};

struct Result {
  std::vector<double> tokens, loss, dF, dquery;
  std::vector<std::vector<double>> grads;
  CommCounters counters;
};

ScorerOptions options(Placement p, bool lod_mechanisms) {
  ScorerOptions o;
  o.lod.region = 2, o.lod.min_tokens = 16, o.lod.max_tokens = 48;
  if (lod_mechanisms) {  // regions of 4 x 4 cells: three levels, so depth differs from rounds
    o.lod.region = 4, o.lod.min_tokens = 4, o.lod.max_tokens = 40;
    o.lod.order = LodOrder::Depth, o.lod.gate = LodGate::Detail;
  }
  o.scorers.placement = p;
  o.scorers.hidden = small_dims().hidden, o.scorers.k = small_dims().k;
  return o;
}

Result run(Placement placement, bool lod_mechanisms, Communicator& comm, Communicator& world,
           Communicator* pair = nullptr) {
  Stream& st = cpu_backend().default_stream();
  const ScorerDims d = small_dims();
  const int64_t N = d.cells();
  RelevanceStage stage(options(placement, lod_mechanisms), d, comm, pair);
  if (lod_mechanisms) stage.set_lod_step({0.5, 0});
  ParamTable t(stage.param_specs(), stage.table_tp(), stage.table_rank(), DType::F32);
  t.allocate(cpu_backend());
  fill_params(t, 1);
  stage.bind(t);
  Rng rng(2);  // the same inputs on every rank
  Tensor F = host_tensor(rng.vec(kB * N * d.d), Shape{kB, N, d.d}, DType::F32);
  Tensor dF = Tensor::zeros(cpu_backend(), F.shape());
  Tensor tex = host_tensor(rng.vec(kB * kTextureChannels * N), Shape{kB, kTextureChannels, N}, DType::F32);
  Tensor query = host_tensor(rng.vec(kB * d.dq), Shape{kB, d.dq}, DType::F32);
  GivenFeatures enc(F, dF);
  comm.reset_counters();
  if (pair) pair->reset_counters();
  stage.forward(st, enc, tex, query, kPrompt, 3);
  const Tensor& tok = stage.tokens();
  Rng lr(4);
  const Vec w = lr.vec(tok.numel());
  Result r;
  r.tokens = to_vector_f64(tok);
  double loss = 0;
  for (size_t i = 0; i < w.size(); ++i) loss += w[i] * r.tokens[i];
  r.loss = {loss};
  Tensor dquery = Tensor::zeros(cpu_backend(), query.shape());
  stage.backward(st, enc, dquery, host_tensor(w, tok.shape(), DType::F32));
  stage.finalize_grads(st);
  r.counters = pair ? pair->counters() : comm.counters();
  if (pair) {
    EXPECT_EQ(comm.counters().total_bytes(), 0u) << "tp2 talks only within the pair";
  }
  // gather what batch-split leaves on the owning ranks (test-side, on another communicator)
  if (placement == Placement::BatchSplit && comm.size() > 1) world.all_reduce(st, dF);
  r.dF = to_vector_f64(dF);
  r.dquery = to_vector_f64(dquery);
  for (const Param& p : t.params()) {
    if (p.spec.split_dim < 0) {
      r.grads.push_back(to_vector_f64(p.grad));
      continue;
    }
    // a shard of the pair: [rows/2, cols] (dim 0) or [1, cols/2] (dim 1, one row): the
    // all-gather of the shards is the full tensor in both cases
    Tensor full = Tensor::zeros(cpu_backend(), p.spec.full);
    pair->all_gather(st, full, p.grad);
    r.grads.push_back(to_vector_f64(full));
  }
  if (placement != Placement::Replicated) {
    const PlacementBytes b = placement_bytes(placement, comm.size(), kB, d, stage.scorer_param_count(), 4);
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllGather), b.all_gather) << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllReduce), b.all_reduce) << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::Broadcast), b.broadcast) << r.counters.str();
    EXPECT_EQ(r.counters.total_bytes(), b.total()) << r.counters.str();
  }
  return r;
}

void equal_to_replicated(bool lod_mechanisms) {
  auto self = self_comm();
  auto world = world_comm();
  auto world2 = world_comm("test_gather");
  const Result ref = run(Placement::Replicated, lod_mechanisms, *self, *world2);
  EXPECT_EQ(ref.counters.total_bytes(), 0u);
  for (Placement p : {Placement::Replicated, Placement::BatchSplit, Placement::Dedicated}) {
    SCOPED_TRACE(placement_name(p));
    const Result r = run(p, lod_mechanisms, *world, *world2);
    EXPECT_LE(max_rel_err(r.tokens, ref.tokens), 1e-5);
    EXPECT_LE(max_rel_err(r.loss, ref.loss), 1e-5);
    EXPECT_LE(max_rel_err(r.dF, ref.dF), 1e-5);
    EXPECT_LE(max_rel_err(r.dquery, ref.dquery), 1e-5);
    ASSERT_EQ(r.grads.size(), ref.grads.size());
    for (size_t i = 0; i < r.grads.size(); ++i) EXPECT_LE(max_rel_err(r.grads[i], ref.grads[i]), 1e-5) << "parameter " << i;
  }
  if (world_size() % 2 != 0) return;  // tp2 needs pairs
  SCOPED_TRACE("tp2");
  MPI_Comm pc;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() / 2, world_rank(), &pc);
  auto pair = make_communicator(DeviceKind::CPU, pc, "pair", 120.0);
  MPI_Comm_free(&pc);
  const Result r = run(Placement::Tp2, lod_mechanisms, *world, *world2, pair.get());
  EXPECT_LE(max_rel_err(r.tokens, ref.tokens), 1e-5);
  EXPECT_LE(max_rel_err(r.loss, ref.loss), 1e-5);
  EXPECT_LE(max_rel_err(r.dF, ref.dF), 1e-5);
  EXPECT_LE(max_rel_err(r.dquery, ref.dquery), 1e-5);
  ASSERT_EQ(r.grads.size(), ref.grads.size());
  for (size_t i = 0; i < r.grads.size(); ++i) EXPECT_LE(max_rel_err(r.grads[i], ref.grads[i]), 1e-5) << "parameter " << i;
}

TEST(Placement, EqualToReplicated) { equal_to_replicated(false); }
TEST(Placement, EqualToReplicatedWithDepthOrderDetailGateAndExploration) { equal_to_replicated(true); }

TEST(Placement, FormulaAtLargerSizes) {
  // The figures bench_scorers prints: G=32, d=768, dq=768, hidden 64, 8 images.
  ScorerDims d;
  const int64_t P = 2 * (64 * 768 + 64 * 13 + 64 + 64 + 1) + 2 * 64 * 768;
  const PlacementBytes bs = placement_bytes(Placement::BatchSplit, 4, 8, d, P, 4);
  EXPECT_EQ(bs.all_gather, uint64_t(2 * 1024 * 771 * 4));
  EXPECT_EQ(bs.all_reduce, uint64_t((8 * 768 + P) * 4));
  const PlacementBytes de = placement_bytes(Placement::Dedicated, 4, 8, d, P, 4);
  EXPECT_EQ(de.broadcast, uint64_t((3 * 8 * 1024 + P) * 4));
  EXPECT_EQ(de.all_reduce, uint64_t(8 * (1024 * 768 + 768) * 4));
  EXPECT_EQ(placement_bytes(Placement::Replicated, 8, 8, d, P, 4).total(), 0u);
  EXPECT_EQ(placement_bytes(Placement::Dedicated, 1, 8, d, P, 4).total(), 0u);
  EXPECT_EQ(placement_bytes(Placement::Tp2, 2, 8, d, P, 4).all_reduce, uint64_t(8 * (3 * 1024 + 3 * 1024 * 768 + 768) * 4));
}

}  // namespace
}  // namespace vlm::test

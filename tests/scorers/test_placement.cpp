// Every placement (scorers/placement/) against the replicated one computed on this rank
// alone (TP=1): the same tokens, the same loss, the same gradients (scorer, balancer and
// LOD parameters after finalize_grads, the features' after the placement's
// reduce_feature_grads, the query's) to 1e-5 relative, at TP = the mpirun size (1, 2, 4,
// 8); the bytes each placement's collectives count equal its formula, per kind, for the
// stage as a whole and phase by phase (forward, backward, finalize, feature gradients).
// tp2 runs where the size is even, on pairs of ranks. The same with the LOD mechanisms
// of docs/scorers.md (lod.order=depth, lod.gate=detail, exploration with probability
// 0.5), and with a soft step (lod.gate=soft) reading the RMS-normalised query
// (scorers.query_norm). The table of placements: names, TP size 1,
// unknown names, the rules of tp2.
#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/communicator.h"
#include "scorers/stage.h"
#include "tests/scorers/scorer_test_util.h"
#include "tests/support/errors.h"
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

// The LOD mechanisms a run uses: none; depth order, the detail gate and exploration; a
// soft step (lod.gate=soft, with scorers.query_norm).
enum class Lod { Plain, DetailExplored, Soft };

ScorerOptions options(const std::string& p, Lod lod = Lod::Plain) {
  ScorerOptions o;
  o.lod.region = 2, o.lod.min_tokens = 16, o.lod.max_tokens = 48;
  if (lod != Lod::Plain) {  // regions of 4 x 4 cells: three levels, so depth differs from rounds
    o.lod.region = 4, o.lod.min_tokens = 4, o.lod.max_tokens = lod == Lod::Soft ? 64 : 40;
    o.lod.order = LodOrder::Depth, o.lod.gate = lod == Lod::Soft ? LodGate::Soft : LodGate::Detail;
  }
  o.scorers.placement = p;
  o.scorers.hidden = small_dims().hidden, o.scorers.k = small_dims().k;
  o.scorers.query_norm = lod == Lod::Soft;  // as configs/colours.cfg: the soft step with the normalised query
  return o;
}

// The bytes a communicator counted between two readings, per kind.
PlacementBytes since(const CommCounters& before, const CommCounters& now) {
  PlacementBytes b;
  b.all_gather = now.bytes_of(CollKind::AllGather) - before.bytes_of(CollKind::AllGather);
  b.all_reduce = now.bytes_of(CollKind::AllReduce) - before.bytes_of(CollKind::AllReduce);
  b.broadcast = now.bytes_of(CollKind::Broadcast) - before.bytes_of(CollKind::Broadcast);
  EXPECT_EQ(now.total_bytes() - before.total_bytes(), b.total()) << "only these kinds: " << now.str();
  return b;
}

void expect_bytes(const PlacementBytes& got, const PlacementBytes& want, const char* phase) {
  EXPECT_EQ(got.all_gather, want.all_gather) << phase;
  EXPECT_EQ(got.all_reduce, want.all_reduce) << phase;
  EXPECT_EQ(got.broadcast, want.broadcast) << phase;
}

Result run(const std::string& placement, Communicator& comm, Communicator* pair = nullptr, Lod lod = Lod::Plain) {
  Stream& st = cpu_backend().default_stream();
  const ScorerDims d = small_dims();
  const int64_t N = d.cells();
  RelevanceStage stage(options(placement, lod), d, comm, pair);
  if (lod == Lod::DetailExplored) stage.set_lod_step({0.5, 0});
  if (lod == Lod::Soft) stage.set_lod_step({0.0, 28, true});
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
  Communicator& group = pair ? *pair : comm;  // where the placement communicates
  const CommCounters start = group.counters();
  stage.forward(st, enc, tex, query, kPrompt, 3);
  const CommCounters after_forward = group.counters();
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
  const CommCounters after_backward = group.counters();
  stage.finalize_grads(st);
  r.counters = group.counters();
  if (pair) {
    EXPECT_EQ(comm.counters().total_bytes(), 0u) << "tp2 talks only within the pair";
  }
  // what the encoder needs: every image's feature gradients (batch-split's stage wrote
  // those of this rank's images)
  stage.reduce_feature_grads(st, dF);
  const std::unique_ptr<ScorerPlacement> pl = make_placement(placement, comm.size());
  const int64_t P = stage.scorer_param_count();
  expect_bytes(since(start, after_forward), pl->forward_bytes(kB, d, 4), "forward");
  expect_bytes(since(after_forward, after_backward), pl->backward_bytes(kB, d, 4), "backward");
  expect_bytes(since(after_backward, r.counters), pl->finalize_bytes(P, 4), "finalize");
  expect_bytes(since(r.counters, group.counters()), pl->feature_grad_bytes(kB, d, 4), "feature gradients");
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
  if (placement != "replicated") {
    const PlacementBytes b = pl->stage_bytes(kB, d, P, 4);
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllGather), b.all_gather) << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::AllReduce), b.all_reduce) << r.counters.str();
    EXPECT_EQ(r.counters.bytes_of(CollKind::Broadcast), b.broadcast) << r.counters.str();
    EXPECT_EQ(r.counters.total_bytes(), b.total()) << r.counters.str();
  }
  return r;
}

void equal_to_replicated(Lod lod) {
  auto self = self_comm();
  auto world = world_comm();
  const Result ref = run("replicated", *self, nullptr, lod);
  EXPECT_EQ(ref.counters.total_bytes(), 0u);
  for (const std::string& p : placement_names()) {
    SCOPED_TRACE(p);
    // A placement that splits each scorer over a group of g ranks (tp2: pairs) runs on
    // consecutive groups of g, where the size allows.
    const int g = make_placement(p, std::max(2, world_size()))->split_group();
    if (g > 0 && world_size() % g != 0) continue;
    std::unique_ptr<Communicator> group;
    if (g > 0) {
      MPI_Comm pc;
      MPI_Comm_split(MPI_COMM_WORLD, world_rank() / g, world_rank(), &pc);
      group = make_communicator(DeviceKind::CPU, pc, "pair", 120.0);
      MPI_Comm_free(&pc);
    }
    const Result r = run(p, *world, group.get(), lod);
    EXPECT_LE(max_rel_err(r.tokens, ref.tokens), 1e-5);
    EXPECT_LE(max_rel_err(r.loss, ref.loss), 1e-5);
    EXPECT_LE(max_rel_err(r.dF, ref.dF), 1e-5);
    EXPECT_LE(max_rel_err(r.dquery, ref.dquery), 1e-5);
    ASSERT_EQ(r.grads.size(), ref.grads.size());
    // A soft step's relevance gradient carries k / tau = 16 times the rounding of the
    // detail's value (f32 sums in another order on each placement).
    const double tol = lod == Lod::Soft ? 5e-5 : 1e-5;
    for (size_t i = 0; i < r.grads.size(); ++i) EXPECT_LE(max_rel_err(r.grads[i], ref.grads[i]), tol) << "parameter " << i;
  }
}

TEST(Placement, EqualToReplicated) { equal_to_replicated(Lod::Plain); }
TEST(Placement, EqualToReplicatedWithDepthOrderDetailGateAndExploration) { equal_to_replicated(Lod::DetailExplored); }
TEST(Placement, EqualToReplicatedWithSoftDetail) { equal_to_replicated(Lod::Soft); }

TEST(Placement, FormulaAtLargerSizes) {
  // The figures bench_scorers prints: G=32, d=768, dq=768, hidden 64, 8 images.
  ScorerDims d;
  const int64_t P = 2 * (64 * 768 + 64 * 13 + 64 + 64 + 1) + 2 * 64 * 768;
  const PlacementBytes bs = make_placement("batch-split", 4)->stage_bytes(8, d, P, 4);
  EXPECT_EQ(bs.all_gather, uint64_t(2 * 1024 * 771 * 4));
  EXPECT_EQ(bs.all_reduce, uint64_t((8 * 768 + P) * 4));
  const PlacementBytes de = make_placement("dedicated", 4)->stage_bytes(8, d, P, 4);
  EXPECT_EQ(de.broadcast, uint64_t((3 * 8 * 1024 + P) * 4));
  EXPECT_EQ(de.all_reduce, uint64_t(8 * (1024 * 768 + 768) * 4));
  EXPECT_EQ(make_placement("replicated", 8)->stage_bytes(8, d, P, 4).total(), 0u);
  EXPECT_EQ(make_placement("dedicated", 1)->stage_bytes(8, d, P, 4).total(), 0u);
  EXPECT_EQ(make_placement("tp2", 2)->stage_bytes(8, d, P, 4).all_reduce, uint64_t(8 * (3 * 1024 + 3 * 1024 * 768 + 768) * 4));
}

// The table: every name makes itself at tp > 1 and the replicated placement at tp = 1
// (nothing to place: no bytes, the whole of the scorers' work, apart streams); unknown
// names and tp2's rules are one line naming the option.
TEST(Placement, Table) {
  const std::vector<std::string> want{"replicated", "batch-split", "dedicated", "tp2"};
  EXPECT_EQ(placement_names(), want);
  ScorerDims d;
  for (const std::string& n : placement_names()) {
    SCOPED_TRACE(n);
    const auto at2 = make_placement(n, 2), at1 = make_placement(n, 1);
    EXPECT_EQ(at2->name(), n);
    EXPECT_EQ(at2->communicates(), n != "replicated");
    EXPECT_EQ(std::string(at1->name()), "replicated");
    EXPECT_FALSE(at1->communicates());
    EXPECT_EQ(at1->share(5), 1.0);
    EXPECT_EQ(at1->stage_bytes(5, d, 1000, 4).total() + at1->feature_grad_bytes(5, d, 4).total(), 0u);
    EXPECT_EQ(at2->split_group(), n == "tp2" ? 2 : 0);
  }
  const std::string unknown = error_of([] { make_placement("sideways", 2); });
  EXPECT_NE(unknown.find("scorers.placement=sideways: expected one of replicated, batch-split, dedicated, tp2"),
            std::string::npos)
      << unknown;
  EXPECT_EQ(error_of([] { check_placement("tp2", 4, 64, "scorers.placement=tp2"); }), "");
  const std::string odd = error_of([] { check_placement("tp2", 3, 64, "--placements: tp2"); });
  EXPECT_NE(odd.find("--placements: tp2 needs an even parallel.tp (pairs of ranks), got parallel.tp=3"), std::string::npos)
      << odd;
  EXPECT_NE(error_of([] { check_placement("tp2", 2, 5, "scorers.placement=tp2"); }).find("scorers.hidden=5"),
            std::string::npos);
  for (const char* n : {"replicated", "batch-split", "dedicated"})
    EXPECT_EQ(error_of([&] { check_placement(n, 3, 5, n); }), "") << n << " has no rule of its own";
}

}  // namespace
}  // namespace vlm::test

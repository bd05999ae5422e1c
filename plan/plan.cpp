// Planner (plan/plan.h).
#include "plan/plan.h"

#include <algorithm>
#include <cstdio>

#include "base/config.h"
#include "base/error.h"
#include "checkpoint/checkpoint_pieces.h"
#include "core/reserving_backend.h"
#include "parallel/options.h"
#include "parallel/stand_in_communicator.h"
#include "scorers/placement/placement.h"

namespace vlm {

namespace {

// The placements `ranked` tries at TP size tp: those the VLM runs there, each once.
std::vector<std::string> placements_at(int tp) {
  std::vector<std::string> v;
  for (const std::string& name : placement_names()) {
    const std::unique_ptr<ScorerPlacement> p = make_placement(name, tp);
    // At tp = 1 every placement is replicated (listed once); one that splits the scorers
    // over a group needs that group to be the TP group (resolve_vlm_config).
    if (p->name() != name || (p->split_group() != 0 && p->split_group() != tp)) continue;
    v.push_back(name);
  }
  return v;
}

}  // namespace

std::string LayoutChoice::str() const {
  return cat("tp=", tp, " dp=", dp, " micro=", micro_batches, " batch=", batch, " zero=", zero,
             " recompute=", recompute_name(recompute),
             " placement=", placement);
}

std::string LayoutPlan::overflow() const {
  const MemoryTerms& m = ranks[size_t(max_rank)].memory;
  const MemoryTerms::Term big = m.largest();
  std::string s = cat("TP rank ", max_rank, " needs ", format_bytes(double(m.total())), ", ",
                      format_bytes(double(m.total() - std::min(m.total(), usable))), " more than the ",
                      format_bytes(double(usable)), " usable on ", device, "; its largest term is ", big.name, " (",
                      format_bytes(double(big.bytes)), ")");
  if (big.bytes > usable)
    s += cat(", which alone exceeds the usable memory by ", format_bytes(double(big.bytes - usable)));
  return s;
}

Planner::Planner(const Config& cfg, const PlanOptions& o, int64_t tok_vocab)
    : cfg_(cfg), o_(o), vocab_(tok_vocab), train_(read_train_options(cfg)), gpu_(gpu_spec(o.gpu)) {
  VLM_REQUIRE(o.nodes >= 1 && o.gpus_per_node >= 1, "--plan.nodes and --plan.gpus_per_node must be at least 1");
  constexpr int64_t kMaxGpus = int64_t(1) << 20;  // the enumeration is linear in the GPUs (about 10 s at this many)
  VLM_REQUIRE(int64_t(o.nodes) * o.gpus_per_node <= kMaxGpus, "--plan.nodes x --plan.gpus_per_node = ",
              int64_t(o.nodes) * o.gpus_per_node, " GPUs: at most ", kMaxGpus, " are planned");
  if (!o.op_table.empty()) rates_ = read_op_table(o.op_table);
  if (o.inter_gbs <= 0) interconnect_gbs(o.interconnect);  // refuses an unknown name
  VLM_REQUIRE(vocab_ > 0 || model_options().is_set(cfg, &ModelConfig::vocab_size) || !train_.llm_hf.empty(),
              "--model.vocab_size or --data.tokenizer: vlm plan needs the vocabulary size (the tokenizer's, or set "
              "model.vocab_size)");
  tp_ = read_parallel_options(cfg).tp;
  const int world = o.world();
  VLM_REQUIRE(tp_ <= o.gpus_per_node && o.gpus_per_node % tp_ == 0, "--parallel.tp=", tp_,
              " does not fit in a node of --plan.gpus_per_node=", o.gpus_per_node,
              " GPUs (a TP group never spans nodes: tp must divide the GPUs of a node)");
  const int dp = world / tp_;
  train_.check(dp);
  global_batch_ = train_.global_batch > 0 ? train_.global_batch : int64_t(dp) * train_.micro_batches * train_.batch;
}

Links Planner::links(int tp, int dp) const {
  Links k;
  k.tp_gbs = o_.intra_gbs > 0 ? o_.intra_gbs : gpu_.nvlink_gbs, k.tp_name = "NVLink";
  // TP groups are adjacent ranks inside a node: gpus_per_node / tp of them per node, so a
  // DP group (one rank of each TP group) leaves the node when there are more TP groups.
  const bool crosses = dp > o_.gpus_per_node / tp;
  if (crosses) {
    k.dp_gbs = o_.inter_gbs > 0 ? o_.inter_gbs : interconnect_gbs(o_.interconnect);
    k.dp_name = o_.inter_gbs > 0 ? "inter-node link" : "InfiniBand " + o_.interconnect;
  } else {
    k.dp_gbs = k.tp_gbs, k.dp_name = "NVLink";
  }
  return k;
}

LayoutChoice Planner::requested() const {
  LayoutChoice c;
  c.tp = tp_, c.dp = o_.world() / tp_, c.micro_batches = train_.micro_batches, c.batch = train_.batch;
  c.zero = c.dp > 1 ? train_.zero : 0;  // ZeRO over one DP rank is none (nn/param_layout.h)
  const VlmConfig v = resolve_vlm_config(cfg_, train_, vocab_, tp_);
  c.recompute = v.llm.recompute, c.placement = v.scorers.scorers.placement;
  return c;
}

LayoutPlan Planner::plan(const LayoutChoice& c) const {
  LayoutPlan p;
  p.choice = c;
  TrainOptions t = train_;
  t.batch = c.batch, t.micro_batches = c.micro_batches;
  VlmConfig v = resolve_vlm_config(cfg_, t, vocab_, c.tp);
  v.llm.recompute = c.recompute;
  v.scorers.scorers.placement = c.placement;
  v.scorers.validate(v.vision.grid(), c.tp);
  p.cfg = v;
  RankLayout l;
  l.tp = c.tp, l.dp = c.dp, l.zero = c.zero, l.bucket_mb = t.bucket_mb;
  l.grad_wire = t.grad_reduce_bf16 ? DType::BF16 : DType::F32;
  for (int r = 0; r < c.tp; ++r) {
    l.tp_rank = r;
    p.ranks.push_back(plan_rank(v, l, t.optim));
    if (p.ranks.back().memory.total() > p.ranks[size_t(p.max_rank)].memory.total()) p.max_rank = r;
  }
  l.tp_rank = 0;
  p.shape = largest_step(v, c.micro_batches);
  p.bytes = step_bytes(v, l, p.ranks[0], p.shape);
  p.work = step_work(v, l, p.ranks[size_t(p.max_rank)], p.shape);
  p.links = links(c.tp, c.dp);
  p.time = step_time(p.work, p.bytes, l, gpu_, o_.bf16, rates_, p.links, c.micro_batches, v.llm.n_layers,
                     v.llm.recompute == Recompute::Full);
  const double gib = double(1ull << 30);
  p.usable = size_t(std::max(0.0, (gpu_.memory_gib - o_.reserve_gib) * gib));
  char d[96];
  std::snprintf(d, sizeof d, "an %s (%.0f GiB less a %.1f GiB reserve)", gpu_.name, gpu_.memory_gib, o_.reserve_gib);
  p.device = d;
  return p;
}

// Each TP rank's model built as plan_rank builds it (train/memory_terms.h: nothing
// allocated), sharded at the level asked for (the runs are the same on every DP rank),
// and the writer's own pieces of it for every DP rank (checkpoint/checkpoint_pieces.h).
std::vector<std::vector<int64_t>> Planner::checkpoint_bytes(const LayoutPlan& p, int zero) const {
  VlmConfig cfg = p.cfg;
  cfg.sharding = DpSharding{zero >= 0 ? zero : p.choice.zero, p.choice.dp, 0};
  std::vector<bool> trainable;
  for (int m = 0; m < kNumModules; ++m) trainable.push_back(!cfg.frozen[size_t(m)]);
  std::vector<std::vector<int64_t>> bytes;
  for (int t = 0; t < p.choice.tp; ++t) {
    ReservingBackend b;
    StandInCommunicator tp("tp", p.choice.tp, t), self("self", 1, 0);
    VlmModel model(cfg, b, tp, self);
    bytes.emplace_back();
    for (int r = 0; r < p.choice.dp; ++r) bytes.back().push_back(pieces_bytes(written_pieces(model.modules(), trainable, r)));
  }
  return bytes;
}

std::vector<LayoutPlan> Planner::ranked(std::vector<std::string>* skipped) const {
  std::vector<LayoutPlan> all;
  const int world = o_.world();
  for (int tp = 1; tp <= o_.gpus_per_node; ++tp) {
    if (o_.gpus_per_node % tp != 0) continue;
    try {
      resolve_vlm_config(cfg_, train_, vocab_, tp);
    } catch (const UserError& e) {
      if (skipped) skipped->push_back(cat("tp=", tp, ": ", e.what()));
      continue;
    }
    const int dp = world / tp;
    for (int M = 1; M <= 64; M *= 2) {
      if (global_batch_ % (int64_t(dp) * M) != 0) continue;
      const int64_t batch = global_batch_ / (int64_t(dp) * M);
      for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        for (const std::string& pl : placements_at(tp))
          for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
            LayoutChoice c;
            c.tp = tp, c.dp = dp, c.micro_batches = M, c.batch = int(batch), c.zero = zero, c.recompute = rc;
            c.placement = pl;
            try {
              all.push_back(plan(c));
            } catch (const UserError& e) {
              if (skipped) skipped->push_back(cat(c.str(), ": ", e.what()));
            }
          }
      }
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const LayoutPlan& a, const LayoutPlan& b) {
    if (a.fits() != b.fits()) return a.fits();
    if (a.fits() && a.time.total() != b.time.total()) return a.time.total() < b.time.total();
    return a.max_bytes() < b.max_bytes();
  });
  return all;
}

}  // namespace vlm

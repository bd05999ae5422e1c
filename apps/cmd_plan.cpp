// `vlm plan`: plans a cluster run of `vlm train` on this machine, without MPI or a GPU
// (plan/plan.h; docs/planning.md):
//   vlm plan --config configs/siglip_qwen2_tp8.cfg --nodes 4 --gpus-per-node 8 [--gpu h100]
// prints the requested layout's exact memory per TP rank and bytes per group, its
// modelled step time, and every layout of the cluster ranked (fitting first, fastest
// first). A layout that does not fit ends with one line naming the term and the excess
// (exit 2), after the tables.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "data/storage/dataset.h"
#include "plan/plan.h"
#include "train/train_options.h"

namespace vlm {

namespace {

struct PlanInputs {
  PlanOptions plan;
  int top = 10;  // ranked layouts printed
};

const OptionSet<PlanInputs>& plan_inputs() {
  static const OptionSet<PlanInputs> set([](OptionSet<PlanInputs>& s) {
    const auto plan = [](auto field) { return at(&PlanInputs::plan, field); };
    s.option("plan.nodes", plan(&PlanOptions::nodes), "nodes of the cluster").range(1, 1 << 16).alias("nodes");
    s.option("plan.gpus_per_node", plan(&PlanOptions::gpus_per_node), "GPUs per node (a TP group stays inside a node)")
        .range(1, 1024)
        .alias("gpus-per-node");
    s.option("plan.gpu", plan(&PlanOptions::gpu), "GPU kind (memory, peak FLOP/s, HBM, NVLink)")
        .one_of({"h100", "h200", "a100"})
        .alias("gpu");
    s.option("plan.interconnect", plan(&PlanOptions::interconnect),
             "inter-node link per GPU: InfiniBand NDR 400 Gb/s, HDR 200 Gb/s, 100 GbE")
        .one_of({"ndr", "hdr", "eth100"})
        .alias("interconnect");
    s.option("plan.intra_gbs", plan(&PlanOptions::intra_gbs),
             "intra-node GB/s per GPU and direction (0 = the GPU's NVLink)")
        .range(0, 1e6);
    s.option("plan.inter_gbs", plan(&PlanOptions::inter_gbs),
             "inter-node GB/s per GPU and direction (0 = plan.interconnect's)")
        .range(0, 1e6);
    s.option("plan.op_table", plan(&PlanOptions::op_table),
             "CSV of measured ops (op,flops,bytes,seconds) replacing the roofline peaks");
    s.option("plan.reserve_gib", plan(&PlanOptions::reserve_gib), "GiB per GPU kept for the CUDA context and workspaces")
        .range(0, 1e4);
    s.option("plan.top", &PlanInputs::top, "ranked layouts printed").range(1, 1000);
  });
  return set;
}

void plan_options(Config& cfg) {
  register_all_train_options(cfg);
  plan_inputs().add_to(cfg);
}

std::string mb(double b) { return format_bytes(b); }
double ms(double s) { return 1e3 * s; }

int64_t tokenizer_vocab(const Config& cfg) {
  const DataOptions d = read_data_options(cfg);
  if (!d.tokenizer.empty()) return Tokenizer::load(d.tokenizer).vocab_size();
  if (d.path.empty() || !std::filesystem::is_regular_file(d.path)) return 0;  // planning needs no data
  DatasetReader ds(d.path);
  return find_tokenizer(d, ds)->vocab_size();
}

void print_memory(const LayoutPlan& p) {
  std::printf("\nmemory per rank (exact: the arenas vlm train allocates; every DP rank of a TP rank alike)\n");
  // One column per term of MemoryTerms (train/memory_terms.h), then the exact total.
  std::printf("  %-7s", "tp rank");
  for (const MemoryTerms::Term& t : p.ranks[0].memory.terms()) std::printf(" | %12s", t.name);
  std::printf(" | %12s | %s\n", "total", "bytes");
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const MemoryTerms& m = p.ranks[r].memory;
    std::printf("  %-7zu", r);
    for (const MemoryTerms::Term& t : m.terms()) std::printf(" | %*s", int(std::max<size_t>(12, std::strlen(t.name))),
                                                           mb(double(t.bytes)).c_str());
    std::printf(" | %12s | %zu\n", mb(double(m.total())).c_str(), m.total());
  }
  std::printf("  usable per GPU: %s on %s: %s\n", mb(double(p.usable)).c_str(), p.device.c_str(),
              p.fits() ? "fits" : "DOES NOT FIT");
}

void print_bytes(const LayoutPlan& p) {
  const LayoutChoice& c = p.choice;
  std::printf("\ncommunication per step (exact bytes as the Communicator counts them, per rank; largest step: %lld "
              "images x (%lld visual + %lld text tokens), %lld backbone tokens per micro-batch, %d micro-batch(es))\n",
              (long long)p.shape.images, (long long)p.shape.visual, (long long)p.shape.text,
              (long long)p.shape.backbone_tokens(p.cfg, c.tp), p.shape.micro_batches);
  std::printf("  %-5s | %5s | %-22s | %14s | %14s | %14s | %14s | %14s | %9s\n", "group", "ranks", "link", "all_reduce",
              "all_gather", "reduce_scatter", "broadcast", "total", "time ms");
  auto row = [&](const char* g, int n, const CommCounters& k, const std::string& link, double gbs, double s) {
    std::printf("  %-5s | %5d | %-22s | %14llu | %14llu | %14llu | %14llu | %14llu | %9.3f\n", g, n,
                (link + " " + std::to_string(int(gbs)) + " GB/s").c_str(),
                (unsigned long long)k.bytes_of(CollKind::AllReduce), (unsigned long long)k.bytes_of(CollKind::AllGather),
                (unsigned long long)k.bytes_of(CollKind::ReduceScatter),
                (unsigned long long)k.bytes_of(CollKind::Broadcast), (unsigned long long)k.total_bytes(), ms(s));
  };
  row("tp", c.tp, p.bytes.tp, p.links.tp_name, p.links.tp_gbs, p.time.tp_s);
  row("dp", c.dp, p.bytes.dp, p.links.dp_name, p.links.dp_gbs, p.time.dp_s);
}

void print_time(const LayoutPlan& p, const Planner& pl) {
  const StepTime& t = p.time;
  const double peak = (pl.options().bf16 ? pl.gpu().bf16_tflops : pl.gpu().fp32_tflops) * 1e12;
  std::printf("\ntime per step (modelled, %s): %.2f ms = compute %.2f ms (%.3g matmul + %.3g attention GFLOP, %s of "
              "other traffic) + TP %.3f ms + exposed DP %.3f ms (of %.3f ms); MFU %.1f%%\n",
              pl.measured_rates() ? "measured op rates" : "roofline", ms(t.total()), ms(t.compute_s),
              p.work.gemm_flops / 1e9, p.work.attention_flops / 1e9, mb(p.work.memory_bytes).c_str(), ms(t.tp_s),
              ms(t.dp_exposed_s), ms(t.dp_s), 100.0 * p.work.model_flops / (peak * t.total()));
}

void print_ranking(const std::vector<LayoutPlan>& all, int top, const LayoutChoice& req) {
  int fit = 0;
  for (const LayoutPlan& p : all) fit += p.fits();
  std::printf("\nrecommended layouts (%d of %zu fit in memory; fastest first, then least memory)\n", fit, all.size());
  std::printf("  %3s | %3s | %3s | %5s | %5s | %4s | %-9s | %-11s | %10s | %9s | %s\n", "#", "tp", "dp", "micro",
              "batch", "zero", "recompute", "placement", "max memory", "step ms", "reason");
  int shown = 0;
  for (size_t i = 0; i < all.size() && shown < top; ++i, ++shown) {
    const LayoutPlan& p = all[i];
    const LayoutChoice& c = p.choice;
    std::string why;
    if (!p.fits()) {
      why = "does not fit: " + p.overflow();
    } else {
      char b[200];
      std::snprintf(b, sizeof b, "%s%.1f%% of memory; compute %.3f + TP %.3f + DP %.3f ms", i == 0 ? "fastest; " : "",
                    100.0 * double(p.max_bytes()) / double(p.usable), ms(p.time.compute_s), ms(p.time.tp_s),
                    ms(p.time.dp_exposed_s));
      why = b;
    }
    const bool is_req = c.tp == req.tp && c.micro_batches == req.micro_batches && c.zero == req.zero &&
                        c.recompute == req.recompute && c.placement == req.placement;
    std::printf("  %3zu | %3d | %3d | %5d | %5d | %4d | %-9s | %-11s | %10s | %9.3f | %s%s\n", i + 1, c.tp, c.dp,
                c.micro_batches, c.batch, c.zero, recompute_name(c.recompute), c.placement.c_str(),
                mb(double(p.max_bytes())).c_str(), ms(p.time.total()), why.c_str(), is_req ? " (requested)" : "");
  }
}

int run_plan(const Config& cfg) {
  const PlanInputs in = plan_inputs().read(cfg);
  PlanOptions o = in.plan;
  o.bf16 = read_train_options(cfg).precision == Precision::BF16;
  const Planner planner(cfg, o, tokenizer_vocab(cfg));
  const LayoutChoice req = planner.requested();
  const GpuSpec& g = planner.gpu();
  std::printf("vlm plan: %d node(s) x %d %s (%.0f GiB, fp32 %.1f / bf16 %.1f TFLOP/s, HBM %.2f TB/s), matmuls in %s\n",
              o.nodes, o.gpus_per_node, g.name, g.memory_gib, g.fp32_tflops, g.bf16_tflops, g.hbm_gbs / 1e3,
              o.bf16 ? "bf16" : "fp32");
  std::printf("requested: %s, global batch %lld\n", req.str().c_str(), (long long)planner.global_batch());
  std::fflush(stdout);
  const LayoutPlan p = planner.plan(req);
  print_memory(p);
  print_bytes(p);
  print_time(p, planner);
  std::printf("\nplanning every layout of %d GPUs with the global batch of %lld ...\n", o.world(),
              (long long)planner.global_batch());
  std::fflush(stdout);
  std::vector<std::string> skipped;
  const std::vector<LayoutPlan> all = planner.ranked(&skipped);
  for (const std::string& s : skipped) std::printf("  skipped %s\n", s.c_str());
  print_ranking(all, in.top, req);
  std::fflush(stdout);
  VLM_REQUIRE(p.fits(), "the requested layout (", req.str(), ") does not fit: ", p.overflow());
  return 0;
}

}  // namespace

VLM_COMMAND(plan, {.path = "plan",
                   .summary = "plan a cluster run: exact memory per rank and bytes per group, modelled step time, "
                              "ranked layouts",
                   .usage = "--config configs/X.cfg --nodes N --gpus-per-node G [--gpu h100|h200|a100] "
                            "[--interconnect ndr|hdr|eth100] [--option value ...]\n"
                            "Runs without MPI or a GPU. The run's options (--tp, --train.*, --model.recompute, "
                            "--scorers.placement, ...) give the requested layout; --model.vocab_size or "
                            "--data.tokenizer gives the vocabulary. See docs/planning.md.",
                   .options = plan_options,
                   .run = run_plan});

}  // namespace vlm

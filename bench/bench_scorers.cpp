// The scorer front end on one rank: per image, at G = 32 and d_v = 768 (defaults), the
// forward+backward time of each scorer, the balancer, the LOD allocation (host) and the
// LOD tokens, and of the whole stage; then the bytes per step each placement moves at
// tp = 2, 4, 8 (the formulas of scorers/placement/, which tests/scorers checks against
// the communicator's counters). Prints figures; asserts nothing.
#include <mpi.h>

#include <cstdio>

#include "base/error.h"
#include "base/options.h"
#include "bench/bench_util.h"
#include "core/device_options.h"
#include "parallel/groups.h"
#include "scorers/stage.h"

using namespace vlm;

namespace {

struct BenchOptions {
  int grid = 32;
  int64_t width = 768, images = 4;
  double seconds = 1.0;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("grid", &BenchOptions::grid, "grid side G").range(1, 1024);
    s.option("width", &BenchOptions::width, "cell feature width d_v (and the query width)").range(1, 65536);
    s.option("images", &BenchOptions::images, "images per batch").range(1, 4096);
    s.option("seconds", &BenchOptions::seconds, "time budget per measurement").range(0.01, 600);
  });
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg("bench_scorers", "per-image time of the scorers, balancer and LOD, and bytes of each placement");
  register_device_options(cfg);
  register_scorer_options(cfg);
  bench_options().add_to(cfg);
  int code = 0;
  MPI_Init(&argc, &argv);
  try {
    if (cfg.parse(argc, argv)) {
      Backend& b = backend_from_config(cfg);
      Stream& s = b.default_stream();
      ScorerOptions o = read_scorer_options(cfg);
      o.scorers.placement = "replicated";
      ScorerDims d;
      const BenchOptions args = bench_options().read(cfg);
      d.G = args.grid, d.d = args.width, d.dq = d.d, d.hidden = o.scorers.hidden, d.k = o.scorers.k;
      const int64_t B = args.images, N = d.cells();
      const double budget = args.seconds;
      auto comm = make_communicator(b.device(), MPI_COMM_SELF, "tp", 300);
      RelevanceStage stage(o, d, *comm);
      ParamTable t(stage.param_specs(), 1, 0, DType::F32);
      t.allocate(b);
      for (const Param& p : t.params()) copy_tensor(p.value, to_host(bench::filled(b, p.value.shape(), DType::F32, 0.05f)));
      stage.bind(t);
      Tensor F = bench::filled(b, Shape{B, N, d.d}), dF = Tensor::zeros(b, Shape{B, N, d.d});
      Tensor tex = bench::filled(b, Shape{B, kTextureChannels, N}, DType::F32, 1.f, 7);
      Tensor q = bench::filled(b, Shape{B, d.dq}, DType::F32, 1.f, 9), dq = Tensor::zeros(b, Shape{B, d.dq});
      GivenFeatures enc(F, dF);
      const std::vector<bool> prompt(size_t(B), true);

      std::printf("bench_scorers on %s\n", b.description().c_str());
      std::printf("G=%d d_v=%lld dq=%lld hidden=%lld k=%d, %lld images, lod.region=%d tokens %lld..%lld budget %s\n", d.G,
                  (long long)d.d, (long long)d.dq, (long long)d.hidden, d.k, (long long)B, o.lod.region,
                  (long long)o.lod.min_tokens, (long long)o.lod.max_tokens,
                  o.lod.fixed_budget ? std::to_string(o.lod.fixed_budget).c_str() : "relevance");
      std::printf("%-34s %12s\n", "forward+backward", "ms / image");
      auto row = [&](const char* what, double sec) { std::printf("%-34s %12.3f\n", what, 1e3 * sec / double(B)); };
      Tensor logits = Tensor::empty(b, Shape{B, N}), dl = bench::filled(b, Shape{B, N}, DType::F32, 1.f, 11);
      for (int k = 0; k < kNumScorers; ++k) {
        const std::unique_ptr<Scorer> sc = make_scorer(ScorerKind(k), d);
        sc->bind(t);
        row(scorer_name(ScorerKind(k)), bench::time_per_call(s, [&] {
              sc->forward(s, logits, F, tex, q);
              sc->backward(s, dl, dF, dq);
            }, 1, 0, budget));
      }
      Balancer bal(d);
      bal.bind(t);
      Tensor S = bench::filled(b, Shape{B, kNumScorers, N}), dS = Tensor::empty(b, S.shape()), r = Tensor::empty(b, Shape{B, N});
      row("balancer", bench::time_per_call(s, [&] {
            bal.forward(s, r, S, q);
            bal.backward(s, dS, dq, dl);
          }, 1, 0, budget));
      LodAllocator alloc(o.lod, d.G);
      const std::vector<double> rv = to_vector_f64(r);
      std::vector<ImageLod> lods(static_cast<size_t>(B));
      row("allocator (host, forward only)", bench::time_per_call(s, [&] {
            for (int64_t i = 0; i < B; ++i) lods[size_t(i)] = alloc.allocate(rv.data() + i * N, 0);
          }, 1, 0, budget));
      LodTokens lt(d, o.lod.region);
      lt.bind(t);
      const int64_t T = LodTokens::total_tokens(lods);
      Tensor tok = Tensor::empty(b, Shape{T, d.d}), dtok = bench::filled(b, Shape{T, d.d}, DType::F32, 1.f, 13);
      std::vector<int64_t> cu;
      row("LOD tokens (pool, embed, gate)", bench::time_per_call(s, [&] {
            lt.forward(s, tok, cu, lods, F);
            lt.backward(s, dF, r, dtok);
          }, 1, 0, budget));
      double tokens = 0;
      row("whole stage", bench::time_per_call(s, [&] {
            stage.forward(s, enc, tex, q, prompt, 1);
            tokens = double(stage.tokens().size(0));
            Tensor g = Tensor::zeros(b, stage.tokens().shape());
            stage.backward(s, enc, dq, g);
          }, 1, 0, budget));
      std::printf("(%.1f visual tokens per image in the last step)\n", tokens / double(B));

      std::printf("\nbytes per step of each placement (f32, %lld images, P = %lld scorer parameters)\n", (long long)B,
                  (long long)stage.scorer_param_count());
      std::printf("%-12s %4s %14s %14s %14s %14s\n", "placement", "tp", "all_gather", "all_reduce", "broadcast", "total");
      for (const std::string& p : placement_names())
        for (int tp : {2, 4, 8}) {
          const PlacementBytes x = make_placement(p, tp)->stage_bytes(B, d, stage.scorer_param_count(), 4);
          std::printf("%-12s %4d %14llu %14llu %14llu %14llu\n", p.c_str(), tp, (unsigned long long)x.all_gather,
                      (unsigned long long)x.all_reduce, (unsigned long long)x.broadcast, (unsigned long long)x.total());
        }
      std::printf("(tp2: on each pair of ranks; the others: on the TP group)\n");
    }
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_scorers: error: %s\n", e.what());
    code = 2;
  }
  MPI_Finalize();
  return code;
}

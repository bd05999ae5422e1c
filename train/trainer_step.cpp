// One optimizer step of the Trainer (train/trainer_state.h): train_step and the
// balancer's weights it logs.
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "model/batch.h"
#include "parallel/groups.h"
#include "parallel/runtime.h"
#include "runlog/run_log.h"
#include "scheduler/trace.h"
#include "train/lod_metrics.h"
#include "train/mfu.h"
#include "train/run_stats.h"
#include "train/step.h"
#include "train/train_measure.h"
#include "train/trainer_state.h"

namespace vlm {

// One optimizer step: the micro-batches from the loader, the step graph (forward,
// backward, DP reduction), the gradient norm, AdamW, then the progress line and metrics.
RunStats::Step Trainer::State::train_step(int64_t n, sched::Trace& trace, double elapsed_before) {
  Stream& s = rt.backend().default_stream();
  Communicator &tpc = rt.groups().tp(), &dp = rt.groups().dp();
  const int M = train.micro_batches;
  RunStats::Step st;
  st.step = n;
  const auto t0 = TrainClock::now();
  const CommCounters tp0 = tpc.counters(), dp0 = dpg->counters();
  std::vector<Batch> batches(static_cast<size_t>(M));
  std::vector<MicroBatch> mbs;
  double counted = 0;
  for (int m = 0; m < M; ++m) {
    const auto tw = TrainClock::now();
    batches[size_t(m)] = loader_at(n).next();
    st.data_wait += seconds_since(tw);
    mbs.push_back(make_micro_batch(batches[size_t(m)], rule, seed ^ uint64_t(n * M + m)));
    mbs.back().lod = vcfg.scorers.lod.step_at(n, total);
    counted += double(mbs.back().counted());
  }
  const double global = all_reduce_values(dp, s, {counted})[0];
  for (MicroBatch& mb : mbs) mb.loss_norm = global > 0 ? global : 1.0;
  model->zero_grads();
  std::vector<sched::TaskTiming> timings;
  const double local = step->run(mbs, &timings);
  int64_t visual = 0, images = 0;  // this rank's, over the step's micro-batches
  for (const MicroBatch& mb : mbs) images += mb.images;
  for (int64_t v : step->visual_tokens()) visual += v;
  LodStepMetrics lm = measure_lod_step(*model, s, batches.back());  // this rank's; its sums join the reduction
  RelevancePrecision& rp = lm.precision;
  const std::vector<double> tot = all_reduce_values(dp, s, {local, double(visual) + counted, double(visual), double(images),
                                                            double(rp.boxed), rp.top_cells, rp.hits, rp.chance_hits});
  st.loss = tot[0], st.tokens = tot[1], st.visual = tot[2], st.images = tot[3];
  rp.boxed = int64_t(tot[4]), rp.top_cells = tot[5], rp.hits = tot[6], rp.chance_hits = tot[7];
  const double gnorm = opt->grad_norm(s, tpc);
  st.relevance_precision = lm.precision.boxed > 0 ? lm.precision.precision() : -1.0;
  st.scorer_grad_norm = lm.scorer_grad_norm;
  if (!std::isfinite(st.loss) || !std::isfinite(gnorm))
    rt.on_every_rank("step " + std::to_string(n), [&] {
      throw UserError("step " + std::to_string(n) + ": the " + (std::isfinite(st.loss) ? "gradient norm" : "loss") +
                      " is not finite (" + std::to_string(std::isfinite(st.loss) ? gnorm : st.loss) +
                      "); stopped before the optimizer step (lower train.lr or raise train.warmup)");
    });
  const double lr = lr_at(train.optim, n, total);
  const float scale = train.optim.clip > 0 && gnorm > train.optim.clip ? float(train.optim.clip / gnorm) : 1.f;
  opt->step(s, n, lr, scale);  // and the bf16 copies of the new weights
  s.synchronize();
  st.tp = counters_since(tpc.counters(), tp0), st.dp = counters_since(dpg->counters(), dp0);
  st.seconds = seconds_since(t0);
  // Memory: the process's peak resident set on CPU, the peak of the device arenas on a GPU.
  const double mem = meter->device() == DeviceKind::CPU ? peak_rss_bytes() : double(meter->peak_bytes());
  StepLine line{n, total, st.loss, lr, gnorm, st.seconds, elapsed_before + st.seconds, st.tokens / st.seconds,
                st.images / st.seconds, st.visual / std::max(1.0, st.images), mem, std::nullopt, start, last_step()};
  if (peak.flops_s > 0)  // this rank's (train/mfu.h)
    line.mfu = step_mfu(vcfg, layout.tp, step_shape(mbs, visual, images), st.seconds, peak.flops_s);
  const bool print = n % train.log_every == 0 || n == 1 || n == total;
  log->step(line, print);
  log_balancer(n);
  std::vector<std::pair<std::string, double>> v = {{"scorer_grad_norm", lm.scorer_grad_norm},
                                                   {"lod_explore", mbs.back().lod.explore},
                                                   {"lod_budget", double(mbs.back().lod.budget)}};
  if (lm.precision.boxed > 0)
    v.insert(v.end(), {{"relevance_precision", lm.precision.precision()},
                       {"relevance_precision_chance", lm.precision.chance()}});
  log->scalars(n, v);
  st.graph = trace.add_step(step->graph(), timings);
  if (print && rt.root() && !sched.trace.empty()) std::printf("  %s\n", st.graph.line().c_str());
  return st;
}

// The mean balancer weights of the last micro-batch (how much each scorer counts).
void Trainer::State::log_balancer(int64_t n) {
  rt.backend().default_stream().synchronize();
  const std::vector<float> w = to_vector_f32(model->stage().balancer().weights());
  double m[3] = {0, 0, 0};
  for (size_t k = 0; k < w.size(); ++k) m[k % 3] += w[k] / double(w.size() / 3);
  log->scalars(n, {{"balancer_propositional", m[0]}, {"balancer_perspectival", m[1]}, {"balancer_participatory", m[2]}});
}

}  // namespace vlm

// VlmStep (train/step.h).
#include "train/step.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "parallel/mpi/mpi_session.h"

namespace vlm {

namespace {

std::string name(const char* what, int m) { return std::string(what) + "." + std::to_string(m); }

}  // namespace

VlmStep::VlmStep(VlmModel& model, sched::StreamSet& streams, DpGrads& dp, const std::vector<bool>& trainable,
                 int micro_batches, const StepOptions& o)
    : model_(model), streams_(streams), dp_(dp), trainable_(trainable), M_(micro_batches), opt_(o),
      losses_(size_t(micro_batches), 0.0), graph_(build()) {
  VLM_REQUIRE(o.mode == sched::Mode::Serial || dp.dp().size() == 1 || mpi_thread_multiple(),
              "scheduler.mode=overlap with DP needs an MPI library with MPI_THREAD_MULTIPLE; use --scheduler.mode serial");
}

sched::Graph VlmStep::build() {
  VLM_ASSERT(M_ >= 1, "at least one micro-batch");
  const auto mods = model_.modules();
  VLM_ASSERT(trainable_.size() == mods.size(), "one trainable flag per module");
  auto trains = [&](ModuleId id) { return trainable_[size_t(id)]; };
  const bool vision_bwd = trains(ModuleId::Vision);
  const bool scorers_bwd = vision_bwd || trains(ModuleId::Scorers);
  const bool query_bwd = scorers_bwd && trains(ModuleId::Llm);
  const bool tp_stage = model_.config().scorers.scorers.placement != Placement::Replicated;
  const std::string sc = tp_stage ? "llm" : "scorer.0";

  sched::GraphBuilder g;
  for (int m = 0; m < M_; ++m) {
    std::vector<std::string> load_after;
    if (m > 0) {
      if (vision_bwd) load_after.push_back(name("vision.bwd", m - 1));
      if (scorers_bwd) load_after.push_back(name("scorers.bwd", m - 1));
      if (query_bwd) load_after.push_back(name("query.bwd", m - 1));
      load_after.push_back(name("llm", m - 1));
    }
    g.add({name("load", m), "vision", load_after, m}, [this, m](Stream& s) { model_.load(s, (*mbs_)[size_t(m)]); });
    g.add({name("vision.fwd", m), "vision", {name("load", m)}, m}, [this](Stream& s) { model_.vision_forward(s); });
    g.add({name("query", m), "llm", {name("load", m)}, m}, [this](Stream& s) { model_.query_forward(s); });
    g.add({name("scorers.pre", m), sc, {name("vision.fwd", m), name("query", m)}, m},
          [this](Stream& s) { model_.scorers_prepare(s); });
    std::vector<std::string> maps;
    for (int k = 0; k < kNumScorers; ++k) {
      maps.push_back(name(("scorer" + std::to_string(k)).c_str(), m));
      g.add({maps.back(), tp_stage ? "llm" : "scorer." + std::to_string(k), {name("scorers.pre", m)}, m},
            [this, k](Stream& s) { model_.scorer_forward(s, k); });
    }
    g.add({name("scorers.post", m), sc, maps, m}, [this](Stream& s) { model_.scorers_finish(s); });
    g.add({name("llm", m), "llm", {name("scorers.post", m)}, m},
          [this, m](Stream& s) { losses_[size_t(m)] = model_.llm_forward_backward(s); });
    if (scorers_bwd)
      g.add({name("scorers.bwd", m), sc, {name("llm", m)}, m}, [this](Stream& s) { model_.scorers_backward(s); });
    if (query_bwd)
      g.add({name("query.bwd", m), "llm", {name("scorers.bwd", m)}, m}, [this](Stream& s) { model_.query_backward(s); });
    if (vision_bwd)
      g.add({name("vision.bwd", m), "vision", {name("scorers.bwd", m)}, m},
            [this](Stream& s) { model_.vision_backward(s); });
  }
  const int last = M_ - 1;
  std::vector<std::string> finish_after{name("llm", last)};
  if (scorers_bwd) finish_after.push_back(name("scorers.bwd", last));
  if (query_bwd) finish_after.push_back(name("query.bwd", last));
  g.add({"finish", "llm", finish_after}, [this](Stream& s) { model_.finish_grads(s); });
  if (dp_.dp().size() > 1) {
    // In the order their gradients are complete (the comm stream runs them in this order).
    const std::pair<ModuleId, std::string> after[] = {{ModuleId::Projector, name("llm", last)},
                                                      {ModuleId::Llm, "finish"},
                                                      {ModuleId::Scorers, "finish"},
                                                      {ModuleId::Vision, name("vision.bwd", last)}};
    for (const auto& [id, dep] : after) {
      if (!trains(id)) continue;
      const size_t i = size_t(id), bytes = dp_.bytes(i);
      dp_bytes_ += bytes;
      sched::TaskSpec spec{std::string("dp.") + module_name(id), "comm", {dep}};
      spec.bytes = bytes;
      g.add(spec, [this, i](Stream& s) { dp_.reduce(s, i); });
    }
  }
  return g.build(streams_.backend());
}

double VlmStep::run(const std::vector<MicroBatch>& mbs, std::vector<sched::TaskTiming>* timings) {
  VLM_ASSERT(int(mbs.size()) == M_, "expected ", M_, " micro-batches, got ", mbs.size());
  mbs_ = &mbs;
  std::fill(losses_.begin(), losses_.end(), 0.0);
  graph_.run(streams_, opt_.mode, timings);
  mbs_ = nullptr;
  double sum = 0;
  for (double l : losses_) sum += l;
  return sum;
}

}  // namespace vlm

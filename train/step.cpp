// VlmStep (train/step.h).
#include "train/step.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "parallel/mpi/mpi_session.h"

namespace vlm {

namespace {

std::string name(const char* what, int m) { return std::string(what) + "." + std::to_string(m); }

}  // namespace

VlmStep::VlmStep(VlmModel& model, sched::StreamSet& streams, DpGrads& dp, const std::vector<bool>& trainable,
                 int micro_batches, const StepOptions& o)
    : model_(model), streams_(streams), dp_(dp), trainable_(trainable), M_(micro_batches), opt_(o),
      slots_(std::min(model.front_slots(), std::max(1, micro_batches))),
      losses_(Tensor::zeros(streams.backend(), Shape{std::max(1, micro_batches)})),
      losses_host_(size_t(std::max(1, micro_batches)), 0.f), visual_(size_t(std::max(1, micro_batches)), 0),
      graph_(build()) {
  VLM_REQUIRE(o.mode == sched::Mode::Serial || dp.dp().size() == 1 || mpi_thread_multiple(),
              "scheduler.mode=overlap with DP needs an MPI library with MPI_THREAD_MULTIPLE; use --scheduler.mode serial");
  if (o.mode == sched::Mode::Overlap && model.tp_size() > 1) {
    AsyncStreamOptions so;
    so.high_priority = true, so.threads = 1;  // a collective's own work is copies and sums
    tp_stream_ = streams.backend().create_async_stream("tp", so);
    tp_side_ = std::make_unique<TpSide>(streams.backend(), *tp_stream_);
  }
}

std::vector<std::pair<int, int>> VlmStep::layer_chunks() const {
  // From the top: a chunk grows downwards while its gradients (the first's with the
  // head's) fit in one bucket; at least one layer each.
  std::vector<std::pair<int, int>> chunks;
  const int64_t cap = dp_.bucket_elems();
  for (int l1 = model_.llm().n_layers(); l1 > 0;) {
    int l0 = l1 - 1;
    auto size = [&](int a) {
      const auto [b0, b1] = model_.llm_grad_range(a, l1);
      return b1 - b0;
    };
    while (l0 > 0 && size(l0 - 1) <= cap) --l0;
    chunks.emplace_back(l0, l1);
    l1 = l0;
  }
  return chunks;
}

sched::Graph VlmStep::build() {
  VLM_ASSERT(M_ >= 1, "at least one micro-batch");
  const auto mods = model_.modules();
  VLM_ASSERT(trainable_.size() == mods.size(), "one trainable flag per module");
  auto trains = [&](ModuleId id) { return trainable_[size_t(id)]; };
  const bool vision_bwd = trains(ModuleId::Vision);
  const bool scorers_bwd = vision_bwd || trains(ModuleId::Scorers);
  const bool query_bwd = scorers_bwd && trains(ModuleId::Llm);
  const bool tp_stage = !model_.stage().scorers_apart();  // the placement communicates
  const std::string sc = tp_stage ? "llm" : "scorer.0";
  const int S = slots_;

  sched::GraphBuilder g;
  // The front end of micro-batch m on slot m % S: after the backward tasks of the slot's
  // previous micro-batch m - S (the last readers of its buffers).
  auto front = [&](int m) {
    const int slot = m % S;
    std::vector<std::string> load_after;
    if (m >= S) {
      load_after.push_back(name("llm", m - S));
      if (vision_bwd) load_after.push_back(name("vision.bwd", m - S));
      if (scorers_bwd) load_after.push_back(name("scorers.bwd", m - S));
      if (query_bwd) load_after.push_back(name("query.bwd", m - S));
    }
    g.add({name("load", m), "vision", load_after, m},
          [this, m, slot](Stream& s) { model_.load(s, (*mbs_)[size_t(m)], slot); });
    g.add({name("vision.fwd", m), "vision", {name("load", m)}, m},
          [this, slot](Stream& s) { model_.vision_forward(s, slot); });
    g.add({name("query", m), "llm", {name("load", m)}, m}, [this, slot](Stream& s) { model_.query_forward(s, slot); });
    g.add({name("scorers.pre", m), sc, {name("vision.fwd", m), name("query", m)}, m},
          [this, slot](Stream& s) { model_.scorers_prepare(s, slot); });
    std::vector<std::string> maps;
    for (int k = 0; k < kNumScorers; ++k) {
      maps.push_back(name(("scorer" + std::to_string(k)).c_str(), m));
      g.add({maps.back(), tp_stage ? "llm" : "scorer." + std::to_string(k), {name("scorers.pre", m)}, m},
            [this, slot, k](Stream& s) { model_.scorer_forward(s, slot, k); });
    }
    g.add({name("scorers.post", m), sc, maps, m}, [this, slot, m](Stream& s) {
      model_.scorers_finish(s, slot);
      visual_[size_t(m)] = model_.visual_tokens(slot);
    });
  };

  // The last micro-batch's llm task in parts (DP > 1, the backbone trains, ZeRO off):
  // llm.fwd, then llm.bwd<c> for the layer chunks from the top, each finalizing the
  // TP-partial gradients it completes, so dp.llm<c> can reduce them during the rest.
  const int last = M_ - 1;
  const bool split = dp_.dp().size() > 1 && dp_.zero() == 0 && trains(ModuleId::Llm);
  const std::vector<std::pair<int, int>> chunks = split ? layer_chunks() : std::vector<std::pair<int, int>>{};
  auto chunk_name = [&](size_t c) { return name(("llm.bwd" + std::to_string(c)).c_str(), last); };
  const std::string llm_last = split ? chunk_name(chunks.size() - 1) : name("llm", last);
  auto llm_task = [&](int m) {
    const int slot = m % S;
    const Tensor loss = losses_.slice(m, m + 1);
    if (!split || m < last) {
      g.add({name("llm", m), "llm", {name("scorers.post", m)}, m},
            [this, slot, loss](Stream& s) { model_.llm_forward_backward(s, slot, loss); });
      return;
    }
    g.add({name("llm.fwd", m), "llm", {name("scorers.post", m)}, m},
          [this, slot, loss](Stream& s) { model_.llm_forward(s, slot, loss); });
    for (size_t c = 0; c < chunks.size(); ++c)
      g.add({chunk_name(c), "llm", {c ? chunk_name(c - 1) : name("llm.fwd", m)}, m},
            [this, slot, l = chunks[c]](Stream& s) { model_.llm_backward(s, slot, l.first, l.second, true); });
  };
  // The backward of micro-batch m (after its llm task).
  auto back = [&](int m) {
    const int slot = m % S;
    const std::string llm_done = m == last ? llm_last : name("llm", m);
    if (scorers_bwd)
      g.add({name("scorers.bwd", m), sc, {llm_done}, m}, [this, slot](Stream& s) { model_.scorers_backward(s, slot); });
    if (query_bwd)
      g.add({name("query.bwd", m), "llm", {name("scorers.bwd", m)}, m},
            [this, slot](Stream& s) { model_.query_backward(s, slot); });
    if (vision_bwd)
      g.add({name("vision.bwd", m), "vision", {name("scorers.bwd", m)}, m},
            [this, slot](Stream& s) { model_.vision_backward(s, slot); });
  };
  // The order tasks are added is each stream's order (graph.h). Two slots: front(m+1)
  // right after llm.m, before m's backward tasks, so it runs during the backbone of m
  // (on `vision` and the scorer streams) and query.m+1 never holds llm.m back.
  front(0);
  for (int m = 0; m < M_; ++m) {
    llm_task(m);
    if (S > 1 && m + 1 < M_) front(m + 1);
    back(m);
    if (S == 1 && m + 1 < M_) front(m + 1);
  }
  std::vector<std::string> finish_after{llm_last};
  if (scorers_bwd) finish_after.push_back(name("scorers.bwd", last));
  if (query_bwd) finish_after.push_back(name("query.bwd", last));
  g.add({"finish", "llm", finish_after}, [this, split](Stream& s) { model_.finish_grads(s, split); });
  // The encoder's gradients are complete after the last encoder backward (every
  // vision.bwd, of either slot, precedes it on the vision stream).
  const std::string vision_done = name("vision.bwd", last);
  if (dp_.dp().size() > 1) {
    auto reduce = [&](std::string task, std::string dep, size_t bytes, sched::TaskFn fn) {
      dp_bytes_ += bytes;
      sched::TaskSpec spec{std::move(task), "comm", {std::move(dep)}};
      spec.bytes = bytes;
      g.add(spec, std::move(fn));
    };
    const size_t llm = size_t(ModuleId::Llm), e = dtype_size(dp_.wire());
    // Split: the layer chunks' buckets first, each after its llm.bwd<c>; the embedding's
    // (query.bwd adds to it) after finish.
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto [b0, b1] = model_.llm_grad_range(chunks[c].first, chunks[c].second);
      reduce("dp.llm" + std::to_string(c), chunk_name(c), size_t(b1 - b0) * e,
             [this, llm, b0, b1](Stream& s) { dp_.reduce_range(s, llm, b0, b1); });
    }
    // In the order their gradients are complete (the comm stream runs them in this order).
    const std::pair<ModuleId, std::string> after[] = {{ModuleId::Projector, llm_last},
                                                      {ModuleId::Llm, "finish"},
                                                      {ModuleId::Scorers, "finish"},
                                                      {ModuleId::Vision, vision_done}};
    for (const auto& [id, dep] : after) {
      if (!trains(id)) continue;
      const size_t i = size_t(id);
      if (split && id == ModuleId::Llm) {
        const int64_t b1 = model_.llm_grad_range(0, model_.llm().n_layers()).first;
        reduce("dp.llm.embed", dep, size_t(b1) * e, [this, i, b1](Stream& s) { dp_.reduce_range(s, i, 0, b1); });
      } else {
        reduce(std::string("dp.") + module_name(id), dep, dp_.bytes(i), [this, i](Stream& s) { dp_.reduce(s, i); });
      }
    }
  }
  return g.build(streams_.backend());
}

double VlmStep::run(const std::vector<MicroBatch>& mbs, std::vector<sched::TaskTiming>* timings) {
  VLM_ASSERT(int(mbs.size()) == M_, "expected ", M_, " micro-batches, got ", mbs.size());
  mbs_ = &mbs;
  struct Side {  // the backbone uses the side stream during this step only
    VlmModel& m;
    ~Side() { m.set_tp_side(nullptr); }
  } side{model_};
  model_.set_tp_side(tp_side_.get());
  graph_.run(streams_, opt_.mode, timings);  // returns after every stream has finished
  mbs_ = nullptr;
  Backend& b = streams_.backend();
  b.copy(losses_host_.data(), DeviceKind::CPU, losses_.data(), b.device(), size_t(M_) * sizeof(float));
  double sum = 0;
  for (int m = 0; m < M_; ++m) sum += double(losses_host_[size_t(m)]);
  return sum;
}

}  // namespace vlm

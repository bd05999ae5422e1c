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
  VLM_ASSERT(!model.vision_pooled() || dp.attached(), "ZeRO >= 2: DpGrads::attach(model) before the step (the encoder's hooks)");
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
  // The backbone's llm task in parts (train/step.h): `gather` (zero 3): every layer's
  // forward and backward a task of its own, after the all-gather of its weights;
  // `layered` (zero >= 2): every micro-batch's backward one layer per task, each layer's
  // gradients reduce-scattered after it; `chunked` (zero 0): the last micro-batch's
  // backward in bucket-sized layer chunks, each chunk's gradients all-reduced after it.
  const int last = M_ - 1, L = model_.llm().n_layers();
  const size_t llm = size_t(ModuleId::Llm);
  const bool multi = dp_.dp().size() > 1, llm_trains = trains(ModuleId::Llm);
  const bool gather = multi && dp_.zero() >= 3;
  const bool layered = gather || (multi && dp_.zero() >= 2 && llm_trains);
  const bool chunked = !layered && multi && dp_.zero() == 0 && llm_trains;
  std::vector<std::pair<int, int>> chunks;  // [l0, l1) from the top
  if (layered)
    for (int l = L - 1; l >= 0; --l) chunks.emplace_back(l, l + 1);
  else if (chunked)
    chunks = layer_chunks();
  auto split = [&](int m) { return layered || (chunked && m == last); };
  // The encoder's blocks (zero >= 2): gathered before each forward and backward (zero 3)
  // and reduced after each backward, inside vision.fwd.m and vision.bwd.m (optim/dp_grads.h):
  // the bytes of each, per micro-batch.
  size_t vision_fwd_bytes = 0, vision_bwd_bytes = 0;
  if (multi && model_.vision_pooled()) {
    const size_t v = size_t(ModuleId::Vision);
    for (int l = 0; l < model_.vision().blocks(); ++l) {
      const int u = model_.vision().layer_unit(l);
      const size_t gather = dp_.zero() >= 3 ? dp_.unit_gather_bytes(v, u) : 0;
      vision_fwd_bytes += gather;
      if (vision_bwd) vision_bwd_bytes += gather + dp_.unit_bytes(v, u);
    }
  }
  auto chunk_name = [&](size_t c, int m) { return name(("llm.bwd" + std::to_string(c)).c_str(), m); };
  auto llm_done = [&](int m) { return split(m) ? chunk_name(chunks.size() - 1, m) : name("llm", m); };
  const std::string llm_last = llm_done(last);
  // The front end of micro-batch m on slot m % S: after the backward tasks of the slot's
  // previous micro-batch m - S (the last readers of its buffers).
  auto front = [&](int m) {
    const int slot = m % S;
    std::vector<std::string> load_after;
    if (m >= S) {
      load_after.push_back(llm_done(m - S));
      if (vision_bwd) load_after.push_back(name("vision.bwd", m - S));
      if (scorers_bwd) load_after.push_back(name("scorers.bwd", m - S));
      if (query_bwd) load_after.push_back(name("query.bwd", m - S));
    }
    g.add({name("load", m), "vision", load_after, m},
          [this, m, slot](Stream& s) { model_.load(s, (*mbs_)[size_t(m)], slot); });
    sched::TaskSpec fwd{name("vision.fwd", m), "vision", {name("load", m)}, m};
    fwd.bytes = vision_fwd_bytes;
    dp_bytes_ += fwd.bytes;
    g.add(fwd, [this, slot](Stream& s) { model_.vision_forward(s, slot); });
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

  // Pool slots (nn/param_table.h: layer l's weights and gradients use slot l % 2): the last
  // task that read each compute slot, and the last reduction of each gradient slot.
  std::string reader[2], reduced[2];
  auto unit = [&](int l) { return model_.llm().layer_unit(l); };
  auto add_gather = [&](const char* pass, int l, int m) {
    const std::string n = name(cat("dp.llm.gather.", pass, l).c_str(), m);
    sched::TaskSpec spec{n, "comm", {}, m};
    if (!reader[l % 2].empty()) spec.after.push_back(reader[l % 2]);
    spec.bytes = dp_.unit_gather_bytes(llm, unit(l));
    dp_bytes_ += spec.bytes;
    g.add(spec, [this, llm, u = unit(l)](Stream& s) { dp_.gather_unit(s, llm, u); });
    return n;
  };
  auto llm_task = [&](int m) {
    const int slot = m % S;
    const Tensor loss = losses_.slice(m, m + 1);
    if (!split(m)) {
      g.add({name("llm", m), "llm", {name("scorers.post", m)}, m},
            [this, slot, loss](Stream& s) { model_.llm_forward_backward(s, slot, loss); });
      return;
    }
    std::string prev = name("llm.fwd", m);
    if (!gather) {
      g.add({prev, "llm", {name("scorers.post", m)}, m},
            [this, slot, loss](Stream& s) { model_.llm_forward(s, slot, loss); });
    } else {
      // Each layer's gather is added before the previous layer's forward, so `comm`
      // runs it during that forward (prefetch one layer ahead).
      std::string next = add_gather("f", 0, m);
      g.add({prev, "llm", {name("scorers.post", m)}, m}, [this, slot](Stream& s) { model_.llm_forward_begin(s, slot); });
      for (int l = 0; l < L; ++l) {
        const std::string mine = next;
        if (l + 1 < L) next = add_gather("f", l + 1, m);
        const std::string task = name(cat("llm.f", l).c_str(), m);
        g.add({task, "llm", {prev, mine}, m}, [this, slot, l](Stream& s) { model_.llm_forward_layers(s, slot, l, l + 1); });
        prev = reader[l % 2] = task;
      }
      g.add({name("llm.head", m), "llm", {prev}, m},
            [this, slot, loss](Stream& s) { model_.llm_forward_end(s, slot, loss); });
      prev = name("llm.head", m);
    }
    // The top layer's weights are still in their slot from the forward; the others are
    // gathered again, each added before the layer above's backward (prefetch).
    std::string next;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto [l0, l1] = chunks[c];
      std::vector<std::string> after{prev};
      if (gather && l0 < L - 1) after.push_back(next);
      if (gather && l0 >= 1) next = add_gather("b", l0 - 1, m);
      if (layered && llm_trains && !reduced[l0 % 2].empty()) after.push_back(reduced[l0 % 2]);
      const std::string task = chunk_name(c, m);
      // The TP-partial gradients this part completes: a layer's for its micro-batch
      // (layered), or the chunk's and, from the top, the head's for the step (chunked).
      const auto [f0, f1] = layered ? model_.llm_layer_range(l0) : model_.llm_grad_range(l0, l1);
      const bool pooled = layered && llm_trains;
      g.add({task, "llm", after, m}, [this, slot, l0, l1, f0, f1, pooled, u = unit(l0)](Stream& s) {
        if (pooled) model_.llm().params().zero_unit_grads(s, u);
        model_.llm_backward(s, slot, l0, l1);
        model_.llm_finalize(s, f0, f1);
      });
      prev = task;
      if (gather) reader[l0 % 2] = task;
      if (pooled) {
        const std::string rs = name(cat("dp.llm", c).c_str(), m);
        sched::TaskSpec spec{rs, "comm", {task}, m};
        spec.bytes = dp_.unit_bytes(llm, unit(l0));
        dp_bytes_ += spec.bytes;
        g.add(spec, [this, llm, u = unit(l0), first = m == 0](Stream& s) { dp_.reduce_unit(s, llm, u, first); });
        reduced[l0 % 2] = rs;
      }
    }
  };
  // The backward of micro-batch m (after its llm task).
  auto back = [&](int m) {
    const int slot = m % S;
    const std::string done = llm_done(m);
    if (scorers_bwd)
      g.add({name("scorers.bwd", m), sc, {done}, m}, [this, slot](Stream& s) { model_.scorers_backward(s, slot); });
    if (query_bwd)
      g.add({name("query.bwd", m), "llm", {name("scorers.bwd", m)}, m},
            [this, slot](Stream& s) { model_.query_backward(s, slot); });
    if (vision_bwd) {
      sched::TaskSpec bwd{name("vision.bwd", m), "vision", {name("scorers.bwd", m)}, m};
      bwd.bytes = vision_bwd_bytes;
      dp_bytes_ += bwd.bytes;
      g.add(bwd, [this, slot](Stream& s) { model_.vision_backward(s, slot); });
    }
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
  // The TP-partial gradients the parts finalized: the chunks' and the head's (chunked), the layers' (layered).
  std::pair<int64_t, int64_t> done{0, 0};
  if (chunked) done = {model_.llm_grad_range(0, L).first, INT64_MAX};
  if (layered && llm_trains) done = {model_.llm_layer_range(0).first, model_.llm_layer_range(L - 1).second};
  g.add({"finish", "llm", finish_after}, [this, done](Stream& s) { model_.finish_grads(s, done.first, done.second); });
  // The encoder's gradients are complete after the last encoder backward (every
  // vision.bwd, of either slot, precedes it on the vision stream).
  const std::string vision_done = name("vision.bwd", last);
  if (multi) {
    auto reduce = [&](std::string task, std::string dep, size_t bytes, sched::TaskFn fn) {
      dp_bytes_ += bytes;
      sched::TaskSpec spec{std::move(task), "comm", {std::move(dep)}};
      spec.bytes = bytes;
      g.add(spec, std::move(fn));
    };
    const size_t e = dtype_size(dp_.wire());
    // Chunked: the layer chunks' buckets first, each after its llm.bwd<c>; the embedding's
    // (query.bwd adds to it) after finish.
    for (size_t c = 0; chunked && c < chunks.size(); ++c) {
      const auto [b0, b1] = model_.llm_grad_range(chunks[c].first, chunks[c].second);
      reduce("dp.llm" + std::to_string(c), chunk_name(c, last), size_t(b1 - b0) * e,
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
      if (chunked && id == ModuleId::Llm) {
        const int64_t b1 = model_.llm_grad_range(0, L).first;
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
  struct Side {  // the backbone uses the side stream during this step only, and no layer
    VlmModel& m;  // fetch: the step gathers in tasks of its own (ZeRO-3)
    LayerFetch fetch;
    ~Side() { m.set_tp_side(nullptr), m.set_layer_fetch(std::move(fetch)); }
  } side{model_, model_.layer_fetch()};
  model_.set_tp_side(tp_side_.get());
  model_.set_layer_fetch(nullptr);
  dp_.begin_step();
  graph_.run(streams_, opt_.mode, timings);  // returns after every stream has finished
  mbs_ = nullptr;
  Backend& b = streams_.backend();
  b.copy(losses_host_.data(), DeviceKind::CPU, losses_.data(), b.device(), size_t(M_) * sizeof(float));
  double sum = 0;
  for (int m = 0; m < M_; ++m) sum += double(losses_host_[size_t(m)]);
  return sum;
}

}  // namespace vlm

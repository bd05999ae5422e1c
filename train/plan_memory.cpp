// MemoryTerms and the planner's rank (train/plan_memory.h).
#include "train/plan_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace vlm {

namespace {

// Address space without memory: anonymous private mappings that are never touched
// (MAP_NORESERVE: no commit charge). Pages a constructor does write (a few small tables,
// the padding columns of the logits) become real; the rest is never backed. Fresh
// mappings read as zero, so zero-filling is skipped. Streams are the CPU backend's.
class ReservingBackend final : public Backend {
 public:
  ~ReservingBackend() override { VLM_ASSERT(sizes_.empty(), "planning backend destroyed with live mappings"); }
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string description() const override { return "address space (planning)"; }
  void* allocate(size_t bytes) override {
    const size_t n = std::max<size_t>(bytes, 1);
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    VLM_REQUIRE(p != MAP_FAILED, "vlm plan: cannot reserve ", format_bytes(double(n)),
                " of address space to plan an arena (vm.overcommit_memory=2 or ulimit -v?)");
    std::lock_guard lock(mu_);
    sizes_[p] = n;
    allocated_ += bytes;
    return p;
  }
  void deallocate(void* p) override {
    std::lock_guard lock(mu_);
    auto it = sizes_.find(p);
    VLM_ASSERT(it != sizes_.end(), "planning backend: unknown mapping");
    munmap(p, it->second);
    sizes_.erase(it);
  }
  void copy(void* dst, DeviceKind dd, const void* src, DeviceKind sd, size_t bytes) override {
    cpu_backend().copy(dst, dd, src, sd, bytes);
  }
  void memset_zero(void*, size_t) override {}  // fresh mappings are zero
  Stream& default_stream() override { return cpu_backend().default_stream(); }
  std::unique_ptr<Stream> create_stream(const std::string& name) override { return cpu_backend().create_stream(name); }
  std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& o) override {
    return cpu_backend().create_async_stream(name, o);
  }
  std::unique_ptr<Event> create_event(bool timing) override { return cpu_backend().create_event(timing); }
  void synchronize() override {}
  bool commits_memory() const override { return false; }
  size_t allocated() const { return allocated_; }

 private:
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  size_t allocated_ = 0;
};

// A group of the layout seen from one of its ranks; the constructors only ask its size
// and rank. Any collective is an internal error (planning never communicates).
class StandInCommunicator final : public Communicator {
 public:
  StandInCommunicator(const std::string& name, int size, int rank) : Communicator(name, 0, 1.0), size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceKind device() const override { return DeviceKind::CPU; }

 protected:
  CommWork fail() const {
    VLM_ASSERT(false, "planning communicator ", name(), " asked to communicate");
    return nullptr;
  }
  CommWork post_all_reduce(Stream&, const Tensor&, ReduceOp) override { return fail(); }
  CommWork post_all_gather(Stream&, const Tensor&, const Tensor&) override { return fail(); }
  CommWork post_reduce_scatter(Stream&, const Tensor&, const Tensor&, ReduceOp) override { return fail(); }
  CommWork post_broadcast(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_send(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_recv(Stream&, const Tensor&, int) override { return fail(); }
  CommWork post_barrier(Stream&) override { return fail(); }

 private:
  int size_, rank_;
};

}  // namespace

std::vector<MemoryTerms::Term> MemoryTerms::terms() const {
  return {{"parameters", params}, {"bf16 weight copies", bf16_copies}, {"gradients", grads}, {"optimizer state", optimizer},
          {"activations", activations}, {"model buffers", buffers}};
}

MemoryTerms::Term MemoryTerms::largest() const {
  const std::vector<Term> t = terms();
  return *std::max_element(t.begin(), t.end(), [](const Term& a, const Term& b) { return a.bytes < b.bytes; });
}

std::string MemoryTerms::str() const {
  std::string s;
  for (const Term& t : terms()) s += std::string(t.name) + " " + format_bytes(double(t.bytes)) + ", ";
  return s + "total " + std::to_string(total()) + " B";
}

MemoryTerms memory_terms(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated) {
  MemoryTerms m;
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    m.params += mods[i].table->value_arena().bytes();
    m.bf16_copies += mods[i].table->working_bytes();
    m.grads += mods[i].table->grad_bytes();
    // ZeRO-1 (train/dp_grads.h): the reduced gradient shard and the values' gather buffer.
    if (dp.zero() > 0 && dp.owned(i).grad.defined()) {
      const DpGrads::Owned& o = dp.owned(i);
      m.optimizer += o.grad.nbytes() + size_t(std::max<int64_t>(1, o.end - o.begin)) * 4;
    }
  }
  m.grads += dp.wire_bytes();
  m.optimizer += opt.state_bytes();
  m.activations = size_t(model.activation_bytes());
  const size_t named = m.params + m.bf16_copies + m.grads + m.optimizer + m.activations;
  VLM_ASSERT(allocated >= named, "memory terms: ", named, " bytes named, ", allocated, " allocated");
  m.buffers = allocated - named;
  return m;
}

RankPlan rank_plan(VlmModel& model, const DpGrads& dp, const AdamW& opt, size_t allocated) {
  RankPlan r;
  r.memory = memory_terms(model, dp, opt, allocated);
  const std::vector<ModuleParams> mods = model.modules();
  for (size_t i = 0; i < mods.size(); ++i) {
    r.owned.push_back(dp.owned(i));
    r.owned.back().grad = Tensor{};  // the figures only: the plan outlives the objects
    r.grad_elems.push_back(int64_t(mods[i].table->grad_bytes() / 4));
  }
  r.scorer_params = model.stage().scorer_param_count();
  return r;
}

RankPlan plan_rank(const VlmConfig& cfg, const RankLayout& l, const OptimOptions& o) {
  ReservingBackend b;
  StandInCommunicator tp("tp", l.tp, l.tp_rank), dp("dp", l.dp, l.dp_rank), self("self", 1, 0);
  VlmModel model(cfg, b, tp, self);
  std::vector<bool> trainable;
  for (int m = 0; m < kNumModules; ++m) trainable.push_back(!cfg.frozen[size_t(m)]);
  const std::vector<ModuleParams> mods = model.modules();
  DpGrads dpg(mods, trainable, dp, l.zero, l.bucket_mb, b, l.grad_wire);
  AdamW opt(mods, trainable, dpg, b, o);
  return rank_plan(model, dpg, opt, b.allocated());
}

std::string format_bytes(double b) {
  char buf[32];
  if (b >= double(1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= double(1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

}  // namespace vlm

// The planner's rank (plan/plan_memory.h).
#include "plan/plan_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/error.h"

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

RankPlan plan_rank(const VlmConfig& config, const RankLayout& l, const OptimOptions& o) {
  ReservingBackend b;
  StandInCommunicator tp("tp", l.tp, l.tp_rank), dp("dp", l.dp, l.dp_rank), self("self", 1, 0);
  VlmConfig cfg = config;
  cfg.sharding = DpSharding{l.zero, l.dp, l.dp_rank};
  VlmModel model(cfg, b, tp, self);
  std::vector<bool> trainable;
  for (int m = 0; m < kNumModules; ++m) trainable.push_back(!cfg.frozen[size_t(m)]);
  const std::vector<ModuleParams> mods = model.modules();
  DpGrads dpg(mods, trainable, dp, l.zero, l.bucket_mb, b, l.grad_wire);
  AdamW opt(mods, trainable, dpg, b, o);
  return rank_plan(model, dpg, opt, b.allocated());
}

}  // namespace vlm

// The CPU backend: host memory (256-byte aligned; blocks of 8 MiB and more 2 MiB-aligned
// and marked for transparent huge pages, which the arenas, weights and optimizer state
// are), two kinds of stream and events that are real completion flags.
//  - The synchronous stream (default_stream, create_stream) runs work when enqueued;
//    record completes the event at once and stamps the host time (steady clock).
//  - The asynchronous stream (create_async_stream) owns one worker thread that runs an
//    in-order queue of items: launched closures, event records (complete the event,
//    stamp the time) and waits (block the worker until the event completes). Its
//    record/wait/launch only enqueue. An exception from a launched closure is kept and
//    rethrown by synchronize(); the items after it still run, so every event recorded
//    on the stream completes and no other stream waits forever. synchronize() called by
//    a closure running on the stream itself returns at once (the work before it is done).
//    The worker's ops run on its own thread pool of AsyncStreamOptions::threads threads
//    (set_thread_budget).
//  - An event counts records (generations): record() arms generation g+1 at enqueue
//    time, its completion publishes g+1; wait() and query() refer to the generation
//    armed when they are called, as cudaStreamWaitEvent does.
// Large copies and zero fills (a gradient arena is cleared every step) are split over
// the caller's thread pool (core/cpu/thread_pool.h), in chunks of whole cache lines.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include <sys/mman.h>

#include "base/error.h"
#include "core/backend.h"
#include "core/cpu/blas.h"
#include "core/cpu/thread_pool.h"
#include "core/cpu_kernels.h"
#include "core/out_of_memory.h"

namespace vlm {
namespace {

using cpu::parallel_for;

class CpuEvent final : public Event {
 public:
  using Clock = std::chrono::steady_clock;
  bool query() override {
    std::lock_guard lock(mu_);
    return done_ >= armed_;
  }
  void synchronize() override { wait_for(armed_generation()); }
  float elapsed_ms(const Event& start) override {
    auto* s = const_cast<CpuEvent*>(dynamic_cast<const CpuEvent*>(&start));
    VLM_ASSERT(s, "CpuEvent::elapsed_ms: start is an event of another backend");
    s->synchronize();
    synchronize();
    std::scoped_lock lock(mu_, s->mu_);
    VLM_ASSERT(done_ > 0 && s->done_ > 0, "CpuEvent::elapsed_ms: both events must have been recorded");
    return std::chrono::duration<float, std::milli>(at_ - s->at_).count();
  }
  // Arms the next generation (at enqueue time) and returns it.
  uint64_t arm() {
    std::lock_guard lock(mu_);
    return ++armed_;
  }
  uint64_t armed_generation() {
    std::lock_guard lock(mu_);
    return armed_;
  }
  // Completes generation g (the work before it is done) and stamps the time.
  // Notifies under the lock: a waiter that sees the generation may destroy the event at
  // once, so the worker must not touch it after unlocking.
  void complete(uint64_t g) {
    std::lock_guard lock(mu_);
    if (g > done_) done_ = g, at_ = Clock::now();
    cv_.notify_all();
  }
  void wait_for(uint64_t g) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ >= g; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t armed_ = 0, done_ = 0;
  Clock::time_point at_{};
};

CpuEvent& cpu_event(Event& e) {
  auto* c = dynamic_cast<CpuEvent*>(&e);
  VLM_ASSERT(c, "CpuStream: event of another backend");
  return *c;
}

// f(begin, end) over [0, bytes) in chunks of whole 64-byte lines, in parallel when large.
template <typename F>
void for_byte_chunks(size_t bytes, F&& f) {
  const int64_t lines = int64_t((bytes + 63) / 64);
  parallel_for(lines, cpu::kGrainStream * 4 / 64, [&](int64_t l0, int64_t l1) {
    const size_t b = size_t(l0) * 64, e = std::min(bytes, size_t(l1) * 64);
    f(b, e);
  });
}

class CpuStream final : public Stream {
 public:
  explicit CpuStream(std::string name) : name_(std::move(name)) {}
  DeviceKind device() const override { return DeviceKind::CPU; }
  const std::string& name() const override { return name_; }
  void synchronize() override {}
  void record(Event& e) override {
    auto& c = cpu_event(e);
    c.complete(c.arm());
  }
  // Only an event of an asynchronous stream can be pending: block until it completes.
  void wait(Event& e) override {
    auto& c = cpu_event(e);
    c.wait_for(c.armed_generation());
  }

 private:
  std::string name_;
};

class AsyncCpuStream final : public Stream {
 public:
  AsyncCpuStream(std::string name, int threads) : name_(std::move(name)) {
    worker_ = std::thread([this, threads] { run(threads); });
  }
  ~AsyncCpuStream() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  DeviceKind device() const override { return DeviceKind::CPU; }
  const std::string& name() const override { return name_; }
  void synchronize() override {
    // From a closure running on this stream: every earlier item has run (in order), and
    // waiting for the queue would wait for the caller itself.
    if (std::this_thread::get_id() == worker_.get_id()) return;
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  void record(Event& e) override {
    auto& c = cpu_event(e);
    push(Item{Item::Record, {}, &c, c.arm()});
  }
  void wait(Event& e) override {
    auto& c = cpu_event(e);
    push(Item{Item::Wait, {}, &c, c.armed_generation()});
  }
  void launch(std::function<void()> fn) override { push(Item{Item::Launch, std::move(fn), nullptr, 0}); }

 private:
  struct Item {
    enum Kind { Launch, Record, Wait } kind;
    std::function<void()> fn;
    CpuEvent* event;
    uint64_t generation;
  };

  void push(Item item) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(item));
    }
    cv_.notify_one();
  }

  void run(int threads) {
    set_thread_budget(threads);
    for (;;) {
      Item item;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop requested and nothing left
        item = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      std::exception_ptr err;
      switch (item.kind) {
        case Item::Launch:
          try {
            item.fn();
          } catch (...) {
            err = std::current_exception();
          }
          break;
        case Item::Record: item.event->complete(item.generation); break;
        case Item::Wait: item.event->wait_for(item.generation); break;
      }
      {
        std::lock_guard lock(mu_);
        if (err && !error_) error_ = err;
        busy_ = false;
        idle_cv_.notify_all();
      }
    }
  }

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Item> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() : default_("default") { cpu::blas_init(); }
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string description() const override {
    return cat("cpu (", cpu_thread_summary(), "; ", cpu_kernel_summary(), ")");
  }
  void* allocate(size_t bytes) override {
    if (bytes >= kHugeMin) {  // 2 MiB pages: fewer TLB misses in the big arenas' sweeps
      const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
      void* p = std::aligned_alloc(kHuge, rounded);
      if (!p) throw OutOfMemory(DeviceKind::CPU, bytes, "", "aligned_alloc failed");
      madvise(p, rounded, MADV_HUGEPAGE);
      return p;
    }
    size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    if (!p) throw OutOfMemory(DeviceKind::CPU, bytes, "", "aligned_alloc failed");
    return p;
  }
  static constexpr size_t kHuge = size_t(2) << 20, kHugeMin = size_t(8) << 20;
  void deallocate(void* p) override { std::free(p); }
  void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) override {
    VLM_ASSERT(dst_dev == DeviceKind::CPU && src_dev == DeviceKind::CPU, "cpu backend copies host memory only");
    if (!bytes) return;
    const char *s = static_cast<const char*>(src), *e = s + bytes;
    char* d = static_cast<char*>(dst);
    if (d + bytes <= s || e <= d)  // disjoint: chunks in parallel
      for_byte_chunks(bytes, [&](size_t b, size_t f) { std::memcpy(d + b, s + b, f - b); });
    else
      std::memmove(dst, src, bytes);
  }
  void memset_zero(void* p, size_t bytes) override {
    char* c = static_cast<char*>(p);
    for_byte_chunks(bytes, [&](size_t b, size_t e) { std::memset(c + b, 0, e - b); });
  }
  Stream& default_stream() override { return default_; }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CpuStream>(name);
  }
  std::unique_ptr<Stream> create_async_stream(const std::string& name, const AsyncStreamOptions& opt) override {
    return std::make_unique<AsyncCpuStream>(name, opt.threads);
  }
  std::unique_ptr<Event> create_event(bool /*timing: always*/ = false) override {
    return std::make_unique<CpuEvent>();
  }
  // The synchronous streams have no pending work; an asynchronous stream is waited for
  // by its own synchronize().
  void synchronize() override {}

 private:
  CpuStream default_;
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace vlm

// The CPU backend: host memory (256-byte aligned; blocks of 8 MiB and more 2 MiB-aligned
// and marked for transparent huge pages, which the arenas, weights and optimizer state
// are), synchronous streams, and events that are complete once recorded and hold the
// host time (steady clock) of their recording.
// Large copies and zero fills (a gradient arena is cleared every step) are split over
// the caller's thread pool (core/cpu/thread_pool.h), in chunks of whole cache lines.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "core/backend.h"
#include "core/cpu/blas.h"
#include "core/cpu/thread_pool.h"
#include "core/error.h"

namespace vlm {
namespace {

using cpu::parallel_for;

class CpuEvent final : public Event {
 public:
  using Clock = std::chrono::steady_clock;
  bool query() override { return true; }
  void synchronize() override {}
  float elapsed_ms(const Event& start) override {
    const auto* s = dynamic_cast<const CpuEvent*>(&start);
    VLM_ASSERT(s, "CpuEvent::elapsed_ms: start is an event of another backend");
    VLM_ASSERT(recorded_ && s->recorded_, "CpuEvent::elapsed_ms: both events must have been recorded");
    return std::chrono::duration<float, std::milli>(at_ - s->at_).count();
  }
  void stamp() { at_ = Clock::now(), recorded_ = true; }

 private:
  Clock::time_point at_{};
  bool recorded_ = false;
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
  void record(Event& e) override { cpu_event(e).stamp(); }
  void wait(Event& e) override { cpu_event(e); }

 private:
  std::string name_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() : default_("default") { cpu::blas_init(); }
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string description() const override {
    return cat("cpu (", cpu_thread_summary(), ")");
  }
  void* allocate(size_t bytes) override {
    if (bytes >= kHugeMin) {  // 2 MiB pages: fewer TLB misses in the big arenas' sweeps
      const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
      void* p = std::aligned_alloc(kHuge, rounded);
      if (!p) throw std::bad_alloc();
      madvise(p, rounded, MADV_HUGEPAGE);
      return p;
    }
    size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    if (!p) throw std::bad_alloc();
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
  std::unique_ptr<Event> create_event(bool /*timing: always*/ = false) override {
    return std::make_unique<CpuEvent>();
  }
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

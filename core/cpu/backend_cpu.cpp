// The CPU backend: host memory (256-byte aligned), synchronous streams, and events that
// are complete once recorded and hold the host time (steady clock) of their recording.
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend.h"
#include "core/error.h"

namespace vlm {
namespace {

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
  CpuBackend() : default_("default") {}
  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string description() const override {
    return cat("cpu (OpenBLAS ", openblas_get_num_threads(), " threads, OpenMP ", omp_get_max_threads(),
               " threads)");
  }
  void* allocate(size_t bytes) override {
    size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded ? rounded : 256);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p) override { std::free(p); }
  void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) override {
    VLM_ASSERT(dst_dev == DeviceKind::CPU && src_dev == DeviceKind::CPU, "cpu backend copies host memory only");
    if (bytes) std::memmove(dst, src, bytes);
  }
  void memset_zero(void* p, size_t bytes) override {
    if (bytes) std::memset(p, 0, bytes);
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

// Backend interface: a device that allocates memory, copies, and runs work in order on
// streams; events order work across streams. CPU and CUDA implement it; the model
// code sees only this interface and the ops (core/ops.h), which dispatch on the
// device of the stream they are given.
//
// Selection: select_backend("auto"|"cpu"|"cuda"): auto = CUDA when the CUDA backend
// was compiled in and a GPU is present, else CPU; the choice is logged in one line.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "core/device.h"

namespace vlm {

// A marker in a stream's work (Stream::record). CPU: work runs when enqueued, so an
// event is complete once recorded and records the host time of its recording. CUDA: a
// cudaEvent_t (core/cuda/cuda_backend.h), with timing only when created with it.
class Event {
 public:
  virtual ~Event() = default;
  // True when the work recorded before the event has completed (an event never
  // recorded counts as complete). Never blocks.
  virtual bool query() = 0;
  // Blocks the host until the event has completed.
  virtual void synchronize() = 0;
  // Milliseconds from `start` to this event. Both must have been recorded, on the same
  // backend, and (CUDA) created with timing; waits for both to complete.
  virtual float elapsed_ms(const Event& start) = 0;
};

// An in-order queue of work on one device. On CPU, work runs synchronously when
// enqueued, so wait is a no-op, record stamps the host time and synchronize returns at
// once.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual DeviceKind device() const = 0;
  virtual const std::string& name() const = 0;
  virtual void synchronize() = 0;
  virtual void record(Event& e) = 0;  // e completes when the work enqueued so far does
  virtual void wait(Event& e) = 0;    // later work on this stream waits for e
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind device() const = 0;
  // One line for logs: "cpu (OpenBLAS, 2 threads)" / "cuda:0 NVIDIA H100 (sm_90, 79.1 GiB)".
  virtual std::string description() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // 256-byte aligned; throws on OOM
  virtual void deallocate(void* p) = 0;
  // Copies `bytes` between host and this backend's device (either side may be host).
  virtual void copy(void* dst, DeviceKind dst_dev, const void* src, DeviceKind src_dev, size_t bytes) = 0;
  virtual void memset_zero(void* p, size_t bytes) = 0;
  // The backend's default stream (the one set-up code and tests use).
  virtual Stream& default_stream() = 0;
  virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
  // timing: the event can measure elapsed_ms (CUDA events without it are cheaper).
  virtual std::unique_ptr<Event> create_event(bool timing = false) = 0;
  virtual void synchronize() = 0;  // waits for all streams of the device
};

Backend& cpu_backend();
// True when the CUDA backend was compiled in and at least one GPU is visible.
bool cuda_available();
// Why CUDA is not available ("not compiled in", "no CUDA device: <driver message>").
std::string cuda_unavailable_reason();
// The CUDA backend on the current device; throws UserError when not available.
Backend& cuda_backend();
Backend& backend_for(DeviceKind d);
// which: "auto" | "cpu" | "cuda". Logs "vlm: backend <description>" once when log is set.
Backend& select_backend(const std::string& which, bool log = true);

}  // namespace vlm

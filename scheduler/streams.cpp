// Stream names, the scheduler's mode and the StreamSet with its thread policy (streams.h).
#include "scheduler/streams.h"

#include <algorithm>
#include <exception>

#include "base/error.h"
#include "scheduler/options.h"

namespace vlm::sched {

Mode parse_mode(std::string_view s) {
  for (Mode m : {Mode::Overlap, Mode::Serial})
    if (s == mode_name(m)) return m;
  throw UserError(cat(scheduler_options().name_of(&SchedulerOptions::mode), "='", s, "': expected overlap or serial"));
}

const char* mode_name(Mode m) { return m == Mode::Overlap ? "overlap" : "serial"; }

const std::array<std::string, kNumStreams>& stream_names() {
  static const std::array<std::string, kNumStreams> names = {"vision", "scorer.0", "scorer.1",
                                                             "scorer.2", "llm",      "comm"};
  return names;
}

int stream_index(std::string_view name) {
  const auto& n = stream_names();
  for (int i = 0; i < kNumStreams; ++i)
    if (n[size_t(i)] == name) return i;
  return -1;
}

int threads_per_stream(int total, int streams) { return std::max(1, total / std::max(1, streams)); }

StreamSet::StreamSet(Backend& backend, int threads) : backend_(backend) {
  const bool cpu = backend.device() == DeviceKind::CPU;
  threads_ = threads > 0 ? threads : threads_per_stream(thread_budget());
  for (const auto& name : stream_names()) {
    AsyncStreamOptions opt;
    opt.high_priority = name == "comm";
    opt.threads = cpu ? threads_ : 0;
    streams_.push_back(backend.create_async_stream(name, opt));
  }
}

StreamSet::~StreamSet() {
  streams_.clear();  // joins the CPU workers
}

Stream& StreamSet::stream(std::string_view name) const {
  int i = stream_index(name);
  VLM_REQUIRE(i >= 0, "unknown stream '", name, "' (expected vision, scorer.0, scorer.1, scorer.2, llm or comm)");
  return stream(i);
}

void StreamSet::synchronize() {
  std::exception_ptr first;
  for (auto& s : streams_) {
    try {
      s->synchronize();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace vlm::sched

// The scheduler's options, registered once: scheduler.mode (overlap | serial, see Mode in
// scheduler/streams.h) and scheduler.trace (a Chrome trace-event JSON file to write,
// empty = none; command-line alias --trace, so `--trace FILE.json`).
#pragma once
#include <string>

#include "base/config.h"
#include "scheduler/streams.h"

namespace vlm::sched {

struct SchedulerOptions {
  Mode mode = Mode::Overlap;
  std::string trace;  // empty: no trace
};

void register_scheduler_options(Config& cfg);
SchedulerOptions scheduler_options(const Config& cfg);

}  // namespace vlm::sched

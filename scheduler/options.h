// The scheduler's options, declared once: scheduler.mode (overlap | serial, see Mode in
// scheduler/streams.h) and scheduler.trace (a Chrome trace-event JSON file to write,
// empty = none; command-line alias --trace, so `--trace FILE.json`).
#pragma once
#include <string>

#include "base/options.h"
#include "scheduler/streams.h"

namespace vlm::sched {

struct SchedulerOptions {
  Mode mode = Mode::Overlap;
  std::string trace;  // empty: no trace
};

const OptionSet<SchedulerOptions>& scheduler_options();  // their declaration (base/options.h)
void register_scheduler_options(Config& cfg);
SchedulerOptions read_scheduler_options(const Config& cfg);

}  // namespace vlm::sched

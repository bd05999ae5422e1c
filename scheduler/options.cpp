// Registration and reading of the scheduler's options (options.h).
#include "scheduler/options.h"

namespace vlm::sched {

void register_scheduler_options(Config& cfg) {
  cfg.add_choice("scheduler.mode", "overlap", {"overlap", "serial"},
                 "overlap: the streams run at once, ordered by the task graph; serial: the same tasks one at a time "
                 "in one fixed order (docs/scheduler.md)");
  cfg.add_string("scheduler.trace", "", "write a Chrome trace-event JSON file of the steps (open in ui.perfetto.dev)");
  cfg.add_alias("trace", "scheduler.trace");
}

SchedulerOptions scheduler_options(const Config& cfg) {
  SchedulerOptions o;
  o.mode = parse_mode(cfg.get_string("scheduler.mode"));
  o.trace = cfg.get_string("scheduler.trace");
  return o;
}

}  // namespace vlm::sched

// The scheduler's options (options.h).
#include "scheduler/options.h"

namespace vlm::sched {

const OptionSet<SchedulerOptions>& scheduler_options() {
  static const OptionSet<SchedulerOptions> set([](OptionSet<SchedulerOptions>& s) {
    s.option("scheduler.mode", &SchedulerOptions::mode,
             "overlap: the streams run at once, ordered by the task graph; serial: the same tasks one at a time "
             "in one fixed order (docs/scheduler.md)")
        .choices(choices_of(mode_name, {Mode::Overlap, Mode::Serial}));
    s.option("scheduler.trace", &SchedulerOptions::trace,
             "write a Chrome trace-event JSON file of the steps (open in ui.perfetto.dev)")
        .alias("trace");
  });
  return set;
}

void register_scheduler_options(Config& cfg) { scheduler_options().add_to(cfg); }
SchedulerOptions read_scheduler_options(const Config& cfg) { return scheduler_options().read(cfg); }

}  // namespace vlm::sched

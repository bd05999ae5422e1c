// Registration of the `device` and `seed` options and the backend they select
// (see device_options.h).
#include "core/device_options.h"

#include "base/config.h"

namespace vlm {

void register_device_options(Config& cfg) {
  cfg.add_choice("device", "auto", {"auto", "cpu", "cuda"},
                 "backend to run on: auto = cuda when a GPU is present, else cpu");
  cfg.add_int("seed", 1234, "seed of every random initialisation and sampling", 0, INT64_MAX);
}

Backend& backend_from_config(const Config& cfg, bool log) { return select_backend(cfg.get_string("device"), log); }

}  // namespace vlm

// The `device` and `seed` options and the backend they select (core/device_options.h).
#include "core/device_options.h"

namespace vlm {

const OptionSet<DeviceOptions>& device_options() {
  static const OptionSet<DeviceOptions> set([](OptionSet<DeviceOptions>& s) {
    s.option("device", &DeviceOptions::device, "backend to run on: auto = cuda when a GPU is present, else cpu")
        .one_of({"auto", "cpu", "cuda"});
    s.option("seed", &DeviceOptions::seed, "seed of every random initialisation and sampling").range(0, INT64_MAX);
  });
  return set;
}

void register_device_options(Config& cfg) { device_options().add_to(cfg); }
DeviceOptions read_device_options(const Config& cfg) { return device_options().read(cfg); }

Backend& backend_from_config(const Config& cfg, bool log) {
  return select_backend(read_device_options(cfg).device, log);
}

}  // namespace vlm

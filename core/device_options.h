// The options every command that computes shares: `--device auto|cpu|cuda` (which
// backend runs the ops; auto = CUDA when compiled in and a GPU is visible, else CPU)
// and `--seed` (the one seed all random initialisation and sampling derive from).
#pragma once
#include <cstdint>
#include <string>

#include "base/options.h"
#include "core/backend.h"

namespace vlm {

struct DeviceOptions {
  std::string device = "auto";  // auto | cpu | cuda
  uint64_t seed = 1234;
};

// Their declaration (base/options.h): `device` and `seed`.
const OptionSet<DeviceOptions>& device_options();
void register_device_options(Config& cfg);
DeviceOptions read_device_options(const Config& cfg);
// select_backend(--device): logs one line naming the backend and why when `log`
// (multi-rank commands log on rank 0 only).
Backend& backend_from_config(const Config& cfg, bool log = true);

}  // namespace vlm

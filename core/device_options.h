// The options every command that computes shares: `--device auto|cpu|cuda` (which
// backend runs the ops; auto = CUDA when compiled in and a GPU is visible, else CPU)
// and `--seed` (the one seed all random initialisation and sampling derive from).
#pragma once
#include "core/backend.h"

namespace vlm {

class Config;

// Registers `device` (choice auto|cpu|cuda, default auto) and `seed`.
void register_device_options(Config& cfg);
// select_backend(cfg.get_string("device")): logs one line naming the backend and why
// when `log` (multi-rank commands log on rank 0 only).
Backend& backend_from_config(const Config& cfg, bool log = true);

}  // namespace vlm

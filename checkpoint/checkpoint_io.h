// Names and helpers shared by the checkpoint writer and reader (checkpoint/checkpoint.h has
// the file layout).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/vlm_model.h"
#include "nn/param_table.h"

namespace vlm {

inline constexpr const char* kModelGroup = "model";
inline constexpr const char* kLatestName = "latest";
inline constexpr const char* kChecksumAttr = "crc32c";

// "optim/m/<module>" (k = 0) or "optim/v/<module>" (k = 1).
std::string moment_group(int k, ModuleId m);
// CRC-32C of the f32 values' bytes (io/crc32c.h).
uint32_t tensor_checksum(const std::vector<float>& v);

}  // namespace vlm

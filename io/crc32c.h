// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of every tensor of
// a checkpoint (checkpoint/checkpoint.h) and of TFRecord frames (runlog/tfrecord.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace vlm {

// The CRC of n bytes, continuing from `crc` (0 to start): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace vlm

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of every tensor of
// a checkpoint (checkpoint/checkpoint.h) and of TFRecord frames (runlog/tfrecord.h).
// On x86-64 CPUs with SSE4.2 the CRC32 instruction computes it (8 bytes per step, about
// 10 GB/s; checkpoints checksum every byte they write and read), elsewhere a portable
// table method does (8 bytes per step through 8 tables).
#pragma once
#include <cstddef>
#include <cstdint>

namespace vlm {

// The CRC of n bytes, continuing from `crc` (0 to start): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// The portable method alone (what crc32c runs without the instruction), for tests.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);

}  // namespace vlm

// CRC-32C (io/crc32c.h): the dispatched function (the CPU instruction where there is one)
// and the portable method both equal the bit-by-bit definition on 2000 random buffers of
// 0..300 bytes at every alignment, continue across any cut, and give the published check
// value; the known vectors of RFC 3720 are tests/runlog/test_tfrecord.cpp's.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "io/crc32c.h"

namespace vlm {
namespace {

// The definition: reflected, polynomial 0x82F63B78, one bit at a time.
uint32_t crc_bits(const uint8_t* p, size_t n, uint32_t crc) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32c, BothMethodsEqualTheDefinition) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
  std::mt19937 rng(3);
  std::string buf(512, '\0');
  for (char& c : buf) c = char(rng());
  for (int i = 0; i < 2000; ++i) {
    const size_t at = rng() % 16, n = rng() % 301, cut = n ? rng() % n : 0;
    const auto* p = reinterpret_cast<const uint8_t*>(buf.data() + at);
    const uint32_t start = i % 3 == 0 ? 0 : uint32_t(rng()), want = crc_bits(p, n, start);
    EXPECT_EQ(crc32c(p, n, start), want) << at << " " << n;
    EXPECT_EQ(crc32c_portable(p, n, start), want) << at << " " << n;
    EXPECT_EQ(crc32c(p + cut, n - cut, crc32c(p, cut, start)), want) << "continued at " << cut;
    EXPECT_EQ(crc32c_portable(p + cut, n - cut, crc32c_portable(p, cut, start)), want) << "continued at " << cut;
  }
}

}  // namespace
}  // namespace vlm

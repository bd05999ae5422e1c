// Damaged images are refused as undecodable and nothing is printed:
//  - a PNG whose compressed rows are damaged but whose chunk CRC was made right passes
//    the structural checks (data/image/image_pipeline.h decodable_header) and reaches
//    libpng, which fails and would print "libpng error: ..." (data/image/
//    codec_messages.h replaces its handlers);
//  - a JPEG cut inside its entropy data has no EOI after its scan: refused before
//    libjpeg (OpenCV would decode it into grey rows and let it through);
//  - a JPEG with damaged entropy data makes libjpeg warn ("Corrupt JPEG data: ...", on
//    stderr) while OpenCV returns wrong pixels; the warning is counted and refuses it.
// The undamaged files decode.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "data/image/image_pipeline.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

cv::Mat noisy(int h, int w) {
  cv::Mat m(h, w, CV_8UC3);
  cv::randu(m, 0, 255);
  return m;
}

std::vector<uint8_t> encoded(const char* ext, const cv::Mat& m) {
  std::vector<uint8_t> b;
  cv::imencode(ext, m, b);
  return b;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// Decodes with stderr captured: (decoded?, what was printed).
std::pair<bool, std::string> decode_quietly(const std::vector<uint8_t>& b) {
  bool ok = false;
  const std::string printed = test::stderr_of([&] { ok = !decode_rgb(b.data(), b.size()).empty(); });
  return {ok, printed};
}

TEST(CodecMessages, DamagedPngDataIsRefusedSilently) {
  const std::vector<uint8_t> good = encoded(".png", noisy(40, 40));
  ASSERT_TRUE(decode_quietly(good).first);
  std::vector<uint8_t> bad = good;
  size_t at = 8;
  while (!std::equal(bad.begin() + long(at) + 4, bad.begin() + long(at) + 8, "IDAT")) at += 12 + be32(&bad[at]);
  const uint32_t len = be32(&bad[at]);
  ASSERT_GT(len, 64u);
  for (size_t k = 20; k < 40; ++k) bad[at + 8 + k] ^= 0xA5;  // inside the deflate stream
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), &bad[at + 4], uInt(len + 4));
  for (int k = 0; k < 4; ++k) bad[at + 8 + len + size_t(k)] = uint8_t(crc >> (24 - 8 * k));
  ASSERT_TRUE(decodable_header(bad.data(), bad.size())) << "the damage must reach libpng";
  const auto [ok, printed] = decode_quietly(bad);
  EXPECT_FALSE(ok);
  EXPECT_EQ(printed, "");
}

TEST(CodecMessages, CutOrDamagedJpegIsRefusedSilently) {
  const std::vector<uint8_t> good = encoded(".jpg", noisy(64, 64));
  ASSERT_TRUE(decode_quietly(good).first);
  size_t sos = 2;  // the start of scan: the entropy data follow its header
  while (!(good[sos] == 0xFF && good[sos + 1] == 0xDA)) ++sos;
  const size_t data = sos + 2 + (size_t(good[sos + 2]) << 8 | good[sos + 3]);
  ASSERT_LT(data + 200, good.size());

  const std::vector<uint8_t> cut(good.begin(), good.begin() + long(data + (good.size() - data) / 2));
  EXPECT_FALSE(decodable_header(cut.data(), cut.size())) << "no EOI after the scan";
  auto [ok, printed] = decode_quietly(cut);
  EXPECT_FALSE(ok) << "a JPEG cut in half decoded";
  EXPECT_EQ(printed, "");

  std::vector<uint8_t> damaged = good;
  for (size_t k = 0; k < 14; ++k) damaged[data + 20 + k] ^= 0x5A;
  ASSERT_TRUE(decodable_header(damaged.data(), damaged.size())) << "the damage must reach libjpeg";
  std::tie(ok, printed) = decode_quietly(damaged);
  EXPECT_FALSE(ok) << "a JPEG with damaged entropy data decoded";
  EXPECT_EQ(printed, "");
}

}  // namespace
}  // namespace vlm

// dtype tests: bf16 round-to-nearest-even (ties, carries into the exponent, overflow to
// inf, NaN stays a quiet NaN, infinities and signed zeros kept), checked against an
// independent nearest-value reference over many bit patterns; and the convert op for
// every pair of f32, bf16 and f64, including f64 -> bf16 without double rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/ops.h"

namespace vlm {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Reference: of the two bf16 values around finite x (truncation and the next one up
// in magnitude), the nearer in exact double arithmetic; on a tie the even one.
uint16_t bf16_ref(double x) {
  const float f = float(x);  // only used to pick the truncated neighbour's bits
  uint16_t lo = uint16_t(bits(f) >> 16);
  double vlo = double(bf16_to_f32(bf16{lo}));
  if (std::fabs(vlo) > std::fabs(x)) vlo = double(bf16_to_f32(bf16{--lo}));  // f rounded up in magnitude
  const uint16_t hi = uint16_t(lo + 1);
  const double vhi = (hi & 0x7f80) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), x) : double(bf16_to_f32(bf16{hi}));
  const double dlo = std::fabs(x - vlo), dhi = std::fabs(vhi - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(Bf16, RoundToNearestEvenSpecialCases) {
  EXPECT_EQ(f32_to_bf16(1.0f).bits, 0x3F80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F808000)).bits, 0x3F80);  // tie, lower is even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F818000)).bits, 0x3F82);  // tie, upper is even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F808001)).bits, 0x3F81);  // just above the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0x3F807FFF)).bits, 0x3F80);  // just below the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0x3FFFC000)).bits, 0x4000);  // carry into the exponent
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()).bits, 0x7F80);  // overflows to inf
  EXPECT_EQ(f32_to_bf16(INFINITY).bits, 0x7F80);
  EXPECT_EQ(f32_to_bf16(-INFINITY).bits, 0xFF80);
  EXPECT_EQ(f32_to_bf16(-0.0f).bits, 0x8000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00000001)).bits, 0x0000);  // tiny denormal rounds to 0
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7F80FFFFu}) {
    bf16 b = f32_to_bf16(from_bits(nan));
    EXPECT_TRUE(std::isnan(bf16_to_f32(b))) << std::hex << nan;
    EXPECT_TRUE(b.bits & 0x0040) << "quiet NaN expected for " << std::hex << nan;
  }
  EXPECT_EQ(bf16_to_f32(bf16{0x3F81}), 1.0078125f);
  EXPECT_EQ(bf16_to_f32(bf16{0xC000}), -2.0f);
}

TEST(Bf16, MatchesNearestEvenReferenceOnRandomBits) {
  std::mt19937 g(5);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = g();
    if ((u & 0x7f800000u) == 0x7f800000u) continue;  // inf/NaN covered above
    const float f = from_bits(u);
    ASSERT_EQ(f32_to_bf16(f).bits, bf16_ref(double(f))) << std::hex << u;
  }
}

Tensor run_convert(const Tensor& src, DType to) {
  Tensor dst = Tensor::empty(cpu_backend(), src.shape(), to);
  convert(cpu_backend().default_stream(), dst, src);
  return dst;
}

TEST(ConvertOp, F32Bf16F64RoundTrips) {
  std::mt19937 g(6);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  std::vector<float> v(1001);
  for (float& x : v) x = u(g);
  v[0] = from_bits(0x3F808000), v[1] = INFINITY, v[2] = -0.0f, v[3] = std::numeric_limits<float>::max();
  Tensor f32 = Tensor::from_vector(v, Shape{1001});
  Tensor b = run_convert(f32, DType::BF16);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(b.ptr<bf16>()[i].bits, f32_to_bf16(v[i]).bits) << i;
  Tensor back = run_convert(b, DType::F32), d = run_convert(b, DType::F64);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(back.ptr<float>()[i], bf16_to_f32(b.ptr<bf16>()[i]));
    EXPECT_EQ(d.ptr<double>()[i], double(bf16_to_f32(b.ptr<bf16>()[i])));
  }
  Tensor f64 = run_convert(f32, DType::F64), f32b = run_convert(f64, DType::F32);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(bits(f32b.ptr<float>()[i]), bits(v[i]));
  Tensor same = run_convert(f32, DType::F32);
  EXPECT_EQ(std::memcmp(same.data(), f32.data(), f32.nbytes()), 0);
}

TEST(ConvertOp, F64ToBf16RoundsOnce) {
  // 1 + 2^-8 + 2^-30: f64 -> f32 gives the tie 1 + 2^-8, which would then round to 1.0;
  // the correctly rounded bf16 is 1 + 2^-7.
  std::vector<double> v = {1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), -(1 + std::ldexp(1.0, -8)),
                           3.0e38, 1e300, -1e300, std::nan(""), 1e-40, 0.1};
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  for (int i = 0; i < 20000; ++i) v.push_back(u(g));
  Tensor b = run_convert(Tensor::from_vector(v, Shape{int64_t(v.size())}), DType::BF16);
  EXPECT_EQ(b.ptr<bf16>()[0].bits, 0x3F81);
  EXPECT_EQ(b.ptr<bf16>()[1].bits, 0xBF80);  // exact tie -> even
  EXPECT_EQ(b.ptr<bf16>()[3].bits, 0x7F80);  // beyond the range -> inf
  EXPECT_EQ(b.ptr<bf16>()[4].bits, 0xFF80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(b.ptr<bf16>()[5])));
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i]) || std::fabs(v[i]) > 3.3e38) continue;
    ASSERT_EQ(b.ptr<bf16>()[i].bits, bf16_ref(v[i])) << i << " " << v[i];
  }
}

}  // namespace
}  // namespace vlm

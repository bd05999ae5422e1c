// Element types and bf16 conversion.
// f32 is the working type on CPU; bf16 is the GPU storage/matmul type; f64 exists on
// CPU only, for finite-difference checks; i32 holds token ids, positions and
// cu_seqlens; u8 holds image bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace vlm {

enum class DType : uint8_t { F32, BF16, F64, I32, U8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::U8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
  }
  return "?";
}

// Brain float 16: the upper half of an IEEE f32. Conversion rounds to nearest even;
// NaN stays NaN (quiet), infinities stay infinite.
struct bf16 {
  uint16_t bits = 0;
};

inline bf16 f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return bf16{uint16_t((u >> 16) | 0x40)};
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t((u + rounding) >> 16)};
}

inline float bf16_to_f32(bf16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Maps a C++ element type to its DType (used by Tensor::ptr<T>() to check access).
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };

}  // namespace vlm

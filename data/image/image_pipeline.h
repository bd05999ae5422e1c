// Image pipeline used by loader threads and converters: bytes -> RGB uint8 -> letterbox
// to S x S (OpenCV inside the .cpp; images cross this header as image.h's types).
// Invariants: decoding returns 8-bit RGB or an empty image and never throws (an
// undecodable image is empty, the caller counts and skips it). Only PNG and JPEG are
// decoded (the schema stores those), and only when the size in their header is at most
// kMaxDecodeSide per side and kMaxDecodePixels in all, checked before OpenCV allocates
// anything, so a small hostile file cannot claim gigabytes of pixels; a PNG cut short
// (a chunk past the end, no IEND) is refused before libpng sees it. Grey images are
// replicated to 3 channels; an alpha channel is composited over the background value
// (so transparent stamps sit on the same colour as the letterbox pad).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/image/image.h"

namespace vlm {

inline constexpr uint64_t kMaxDecodeSide = 32768;                // as schema::kMaxSide
inline constexpr uint64_t kMaxDecodePixels = uint64_t(1) << 26;  // 64 megapixels

// True when the bytes start as a PNG or JPEG whose header size is within the limits
// above, a PNG has every chunk with its CRC and compressed rows that could fill the
// declared size, and a JPEG has an EOI after its first scan (the check every decoder of
// data/image makes before OpenCV runs).
bool decodable_header(const uint8_t* data, size_t n);
// PNG or JPEG bytes -> RGB, or empty on failure.
RgbImage decode_rgb(const uint8_t* data, size_t n, uint8_t background = 0);
// The image file a user named (`option`, e.g. "--image"), read within the schema's
// limit of one encoded image (read_file_bounded, checked before the bytes are
// allocated) and decoded: a UserError naming the option and the file otherwise.
RgbImage read_rgb_file(const std::string& path, std::string_view option);
// Raw HWC pixels (c = 1, 3 or 4; channel order RGB[A]) -> RGB (a copy).
RgbImage raw_to_rgb(const uint8_t* pixels, int h, int w, int c, uint8_t background = 0);
// Scales the longer side to S keeping the aspect ratio (INTER_AREA when shrinking,
// INTER_LINEAR when enlarging) and centres it on the S x S canvas dst (packed RGB,
// 3*S*S bytes the caller owns, e.g. a batch slot) filled with background: no
// allocation besides OpenCV's resize scratch. An image already S x S is copied as is.
void letterbox_into(const ImageView& rgb, int S, uint8_t background, uint8_t* dst);
// Where letterbox_into puts a height x width image on the S x S canvas: resized to
// w x h pixels with its top-left pixel at (x0, y0) (an S x S image: x0 = y0 = 0, w = h = S).
struct LetterboxPlace {
  int x0 = 0, y0 = 0, w = 0, h = 0;
};
LetterboxPlace letterbox_place(int height, int width, int S);
// dst[i] = src[i] / 255 in f32 (the rounding of OpenCV's convertTo with scale 1/255).
void to_unit_float(const uint8_t* src, size_t n, float* dst);

}  // namespace vlm

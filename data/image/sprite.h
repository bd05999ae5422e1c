// Sprites: small RGBA pictures composited over an RGB canvas (the scenes converter,
// data/convert/convert_scenes.cpp, draws its items and clutter with them).
// Invariants:
//  - Pixels are packed [height, width, 4], R G B premultiplied by A (every colour value
//    <= its alpha), so resizing never bleeds the colour of transparent pixels into the
//    edge and compositing is one multiply-add per channel (over()).
//  - Every function is deterministic (integer arithmetic; OpenCV's resize inside
//    sprite.cpp), so a scene drawn twice from the same seed is byte-identical.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlm {

struct Sprite {
  std::vector<uint8_t> px;  // [height, width, 4] premultiplied RGBA
  int height = 0, width = 0;

  bool empty() const { return height == 0 || width == 0; }
  const uint8_t* at(int y, int x) const { return px.data() + (size_t(y) * size_t(width) + size_t(x)) * 4; }
};

// Half-open pixel rectangle [x0, x1) x [y0, y1); empty when x0 >= x1 or y0 >= y1.
struct PixelBox {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool empty() const { return x0 >= x1 || y0 >= y1; }
};

// One premultiplied channel value p of alpha a over the background value bg.
inline uint8_t over(uint8_t p, uint8_t a, uint8_t bg) {
  return uint8_t(p + (int(bg) * (255 - a) + 127) / 255);
}

// From straight (not premultiplied) RGBA pixels, [h, w, 4].
Sprite sprite_from_rgba(const uint8_t* rgba, int h, int w);
// A grey picture drawn in one colour: grey value v gives alpha min(255, 3 v) and colour
// tint * (0.3 + 0.7 v / 255), so v = 0 is transparent and the shading of the picture
// stays visible (Fashion-MNIST items on their black background).
Sprite sprite_from_grey(const uint8_t* grey, int h, int w, const uint8_t tint[3]);
// Decoded PNG/JPEG bytes with their alpha (grey, grey+alpha, palette and RGB images are
// opaque where they have no alpha); empty when image_pipeline.h's decode_rgb would fail.
Sprite decode_sprite(const uint8_t* data, size_t n);
// Resized to h x w (INTER_AREA when shrinking both sides, INTER_LINEAR otherwise).
Sprite resize_sprite(const Sprite& s, int h, int w);
// The part of s inside box (which must lie inside s).
Sprite crop_sprite(const Sprite& s, const PixelBox& box);
// The smallest box holding every pixel that changes the background colour bg when s is
// composited over it (empty when none does).
PixelBox visible_box(const Sprite& s, const uint8_t bg[3]);
// Composites s over the packed RGB canvas [ch, cw, 3] with its top-left pixel at
// (left, top); the parts outside the canvas are clipped.
void composite(const Sprite& s, uint8_t* canvas, int ch, int cw, int left, int top);

}  // namespace vlm

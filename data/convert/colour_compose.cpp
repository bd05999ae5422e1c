// Implementation of compose_colour_scene (the layout rules are in colour_compose.h).
#include "data/convert/colour_compose.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "data/convert/scene_compose.h"
#include "data/image/glyph.h"

namespace vlm {

namespace {

// The first k of a uniform random permutation of 0..n-1 (Fisher-Yates from the front).
std::vector<int> draw_distinct(int n, int k, SceneRng& rng) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  for (int i = 0; i < k; ++i) std::swap(v[size_t(i)], v[size_t(rng.range(i, n - 1))]);
  v.resize(size_t(k));
  return v;
}

// A picture of the classes in `tint`, longer side `side`, cut to what changes the
// background; empty when nothing does. *class_id = its class.
Sprite draw_visible(SceneLibrary* lib, ColourClasses classes, ScenePool pool, int side, const uint8_t tint[3],
                    const uint8_t bg[3], SceneRng& rng, SceneItemRef* ref, int* class_id) {
  Sprite s;
  if (classes == ColourClasses::Fashion) {
    *ref = lib->draw(pool, 0.0, rng);
    s = lib->render(*ref, std::max(side, 1), tint);
    *class_id = lib->class_of(*ref);
  } else {
    const int digit = int(rng.range(0, 9)), style = int(rng.range(0, kDigitStyles - 1));
    *ref = {false, 10 * style + digit};
    const GreyPicture g = digit_picture(digit, style, std::max(side, 1));
    s = sprite_from_grey(g.px.data(), g.height, g.width, tint);
    *class_id = digit;
  }
  const PixelBox vb = visible_box(s, bg);
  return vb.empty() ? Sprite{} : crop_sprite(s, vb);
}

}  // namespace

const std::vector<SceneClass>& digit_classes() {
  static const std::vector<SceneClass> c = {
      {"zero", "a zero", false}, {"one", "a one", false},     {"two", "a two", false},   {"three", "a three", false},
      {"four", "a four", false}, {"five", "a five", false},   {"six", "a six", false},   {"seven", "a seven", false},
      {"eight", "an eight", false}, {"nine", "a nine", false}};
  return c;
}

namespace {

// The slots of n items: anywhere, or K to a block of 2 x 2 slots (ColourSceneOptions).
std::vector<int> draw_slots(int grid, int n, int K, SceneRng& rng) {
  if (K == 0) return draw_distinct(grid * grid, n, rng);
  const int half = grid / 2;
  std::vector<int> slots;
  for (int b : draw_distinct(half * half, n / K, rng))
    for (int q : draw_distinct(4, K, rng))
      slots.push_back((2 * (b / half) + q / 2) * grid + 2 * (b % half) + q % 2);
  return slots;
}

}  // namespace

ColourScene compose_colour_scene(SceneLibrary* lib, const ColourSceneOptions& o, ScenePool pool, SceneRng& rng) {
  const int size = o.size, grid = o.grid, K = o.block_items;
  const ColourClasses classes = o.classes;
  const int slot = grid > 0 ? size / grid : 0;
  VLM_ASSERT(grid >= 1 && size % grid == 0 && slot >= kColourMinSlot && o.min_items >= kColourMinItems &&
                 o.min_items <= o.max_items && o.max_items <= std::min(kColourPaletteSize, grid * grid) &&
                 (K == 0 || (K >= 2 && K <= 4 && grid % 2 == 0 && o.min_items % K == 0 && o.max_items % K == 0)) &&
                 (classes == ColourClasses::Digits || (lib && !lib->pool_empty(pool))),
             "compose_colour_scene: size ", size, " grid ", grid, " items ", o.min_items, "..", o.max_items,
             " block_items ", K);
  ColourScene sc;
  sc.size = size, sc.grid = grid;
  sc.background = uint8_t(rng.range(16, 64));
  const uint8_t bg[3] = {sc.background, sc.background, sc.background};
  sc.rgb.assign(size_t(size) * size_t(size) * 3, sc.background);

  const int n = K == 0 ? int(rng.range(o.min_items, o.max_items)) : K * int(rng.range(o.min_items / K, o.max_items / K));
  const std::vector<int> slots = draw_slots(grid, n, K, rng);
  const std::vector<int> colours = draw_distinct(kColourPaletteSize, n, rng);
  const int inner = slot - 2;  // the box keeps one pixel from the slot's edges
  const int lo = int(std::ceil(0.75 * inner));
  for (int k = 0; k < n; ++k) {
    ColourItem it;
    it.colour = colours[size_t(k)], it.slot = slots[size_t(k)];
    Sprite s;
    while (s.empty())  // a picture with nothing visible is redrawn (none in Fashion-MNIST)
      s = draw_visible(lib, classes, pool, int(rng.range(lo, inner)), kColourPalette[it.colour].rgb, bg, rng, &it.ref,
                       &it.class_id);
    const int sx = (it.slot % grid) * slot + 1, sy = (it.slot / grid) * slot + 1;
    const int left = sx + int(rng.range(0, inner - s.width)), top = sy + int(rng.range(0, inner - s.height));
    composite(s, sc.rgb.data(), size, size, left, top);
    it.box = {left, top, left + s.width, top + s.height};
    sc.items.push_back(it);
  }

  for (int k = 0; k < 2 * grid * grid; ++k) {
    const uint8_t g = uint8_t(rng.range(96, 176));
    const uint8_t tint[3] = {g, g, g};
    SceneItemRef ref;
    int class_id = 0;
    const Sprite whole =
        draw_visible(lib, classes, pool, int(rng.uniform(0.5, 0.9) * slot), tint, bg, rng, &ref, &class_id);
    if (whole.empty()) continue;
    const int w = std::max(1, int(std::ceil(rng.uniform(0.4, 0.7) * whole.width)));
    const int h = std::max(1, int(std::ceil(rng.uniform(0.4, 0.7) * whole.height)));
    const int x0 = int(rng.range(0, whole.width - w)), y0 = int(rng.range(0, whole.height - h));
    Sprite frag = crop_sprite(whole, {x0, y0, x0 + w, y0 + h});
    const PixelBox vb = visible_box(frag, bg);
    if (vb.empty()) continue;
    frag = crop_sprite(frag, vb);
    if (place_clutter(frag, sc.items, rng, sc.rgb.data(), size)) ++sc.clutter;
  }
  return sc;
}

}  // namespace vlm

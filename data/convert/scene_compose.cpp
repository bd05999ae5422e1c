// Implementation of compose_scene (the layout rules are in scene_compose.h).
#include "data/convert/scene_compose.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace vlm {

namespace {

// A colour at least 150 from bg (squared Euclidean RGB distance >= 150^2).
void pick_tint(SceneRng& rng, const uint8_t bg[3], uint8_t tint[3]) {
  for (int t = 0; t < 100; ++t) {
    int d2 = 0;
    for (int k = 0; k < 3; ++k) {
      tint[k] = uint8_t(rng.range(0, 255));
      d2 += (int(tint[k]) - bg[k]) * (int(tint[k]) - bg[k]);
    }
    if (d2 >= 150 * 150) return;
  }
  for (int k = 0; k < 3; ++k) tint[k] = uint8_t(bg[k] < 128 ? 255 : 0);  // distance >= 3 x 128^2
}

// An item of the pool drawn with longer side `side`, cut to its visible box; empty when
// nothing of it is visible (or a stamp cannot be decoded).
Sprite draw_item(SceneLibrary& lib, ScenePool pool, double stamp_fraction, int side, const uint8_t bg[3],
                 SceneRng& rng, SceneItemRef* ref) {
  *ref = lib.draw(pool, stamp_fraction, rng);
  uint8_t tint[3];
  pick_tint(rng, bg, tint);
  const Sprite s = lib.render(*ref, std::max(side, 1), tint);
  if (s.empty()) return {};
  const PixelBox vb = visible_box(s, bg);
  return vb.empty() ? Sprite{} : crop_sprite(s, vb);
}

}  // namespace

Scene compose_scene(SceneLibrary& lib, ScenePool pool, int size, double stamp_fraction, SceneRng& rng) {
  VLM_ASSERT(size >= 3 && !lib.pool_empty(pool), "compose_scene: size ", size);
  Scene sc;
  sc.size = size;
  for (auto& c : sc.background) c = uint8_t(rng.range(0, 255));
  sc.rgb.resize(size_t(size) * size_t(size) * 3);
  for (size_t i = 0; i < sc.rgb.size(); ++i) sc.rgb[i] = sc.background[i % 3];
  const double cell = size / 3.0;

  const int n_items = int(rng.range(kSceneMinItems, kSceneMaxItems));
  bool used[kSceneRegions] = {};
  for (int k = 0; k < n_items; ++k) {
    Sprite s;
    SceneItemRef ref;
    for (int t = 0; t < 60; ++t) {
      if (t % 20 == 0) {  // (re)draw, 0.8x smaller at each redraw
        const double side = rng.uniform(0.5, 0.95) * cell * (t < 20 ? 1.0 : t < 40 ? 0.8 : 0.64);
        s = draw_item(lib, pool, stamp_fraction, int(side), sc.background, rng, &ref);
      }
      if (s.empty() || s.width > size || s.height > size) continue;
      const int left = int(rng.range(0, size - s.width)), top = int(rng.range(0, size - s.height));
      const PixelBox box{left, top, left + s.width, top + s.height};
      const int region = region_of(box, size, size);
      if (used[region]) continue;
      bool clear = true;
      for (const SceneItem& other : sc.items) clear = clear && !too_close(box, other.box);
      if (!clear) continue;
      composite(s, sc.rgb.data(), size, size, left, top);
      used[region] = true;
      sc.items.push_back({ref, lib.class_of(ref), box, region});
      break;
    }
  }

  const int n_clutter = int(rng.range(4, 12));
  for (int k = 0; k < n_clutter; ++k) {
    SceneItemRef ref;
    Sprite whole = draw_item(lib, pool, stamp_fraction, int(rng.uniform(0.3, 0.6) * cell), sc.background, rng, &ref);
    if (whole.empty()) continue;
    const int w = std::max(1, int(std::ceil(rng.uniform(0.3, 0.6) * whole.width)));
    const int h = std::max(1, int(std::ceil(rng.uniform(0.3, 0.6) * whole.height)));
    const int x0 = int(rng.range(0, whole.width - w)), y0 = int(rng.range(0, whole.height - h));
    Sprite frag = crop_sprite(whole, {x0, y0, x0 + w, y0 + h});
    const PixelBox vb = visible_box(frag, sc.background);
    if (vb.empty()) continue;
    frag = crop_sprite(frag, vb);
    if (place_clutter(frag, sc.items, rng, sc.rgb.data(), size)) ++sc.clutter;
  }
  return sc;
}

}  // namespace vlm

// compose_scene: the picture and the item boxes of one scene of the scenes converter
// (convert_scenes.cpp; docs/dataset-format.md, "Scenes"). Rules, with cell = size / 3:
//  - A size x size RGB canvas of one background colour (uniform random RGB).
//  - 2-6 items (uniform count), each drawn from the library's pool with its longer side
//    uniform in [0.5, 0.95] x cell; Fashion-MNIST pictures in a random colour at least
//    150 (Euclidean RGB distance) from the background, stamps in their own colours.
//  - An item's box is its visible box (sprite.h visible_box: the pixels that differ
//    from the background), half-open, inside the canvas; only the pixels inside it are
//    drawn, so every pixel outside all boxes that an item could have touched keeps the
//    background colour. Boxes are at least kSceneGap pixels apart, and no two share a
//    region (region_of: the cell of the 3 x 3 grid holding the box centre). An item that
//    finds no such place in 60 tries (redrawn smaller every 20) is left out.
//  - Clutter: 4-12 fragments, each a crop of 30-60% of each side of an item drawn at
//    0.3-0.6 x cell, cut to its visible box and placed at least kSceneGap pixels away
//    from every item box (fragments may overlap each other); one that finds no place in
//    30 tries is left out.
//  - Everything is drawn from `rng` alone (scene_rng.h), so a seed gives the same scene.
#pragma once
#include <cstdint>
#include <vector>

#include "data/convert/scene_library.h"
#include "data/convert/scene_rng.h"
#include "data/image/sprite.h"

namespace vlm {

inline constexpr int kSceneGap = 3;
inline constexpr int kSceneMinItems = 2, kSceneMaxItems = 6;
inline constexpr int kSceneRegions = 9;
// Region r = 3 * row + column, rows top to bottom, columns left to right.
inline constexpr const char* kSceneRegionNames[kSceneRegions] = {
    "top left",    "top middle", "top right",    "middle left", "center",
    "middle right", "bottom left", "bottom middle", "bottom right"};

// The region of the centre of box b on a width x height canvas: column
// floor(3 (x0 + x1) / (2 width)), row floor(3 (y0 + y1) / (2 height)) (exact integers).
inline int region_of(const PixelBox& b, int width, int height) {
  const int col = int(3 * (int64_t(b.x0) + b.x1) / (2 * int64_t(width)));
  const int row = int(3 * (int64_t(b.y0) + b.y1) / (2 * int64_t(height)));
  return 3 * (row < 2 ? row : 2) + (col < 2 ? col : 2);
}

// True when a, grown by kSceneGap pixels on every side, meets b.
inline bool too_close(const PixelBox& a, const PixelBox& b) {
  return a.x0 - kSceneGap < b.x1 && b.x0 < a.x1 + kSceneGap && a.y0 - kSceneGap < b.y1 && b.y0 < a.y1 + kSceneGap;
}

// Clutter: `frag` composited at a random place of the size x size canvas `rgb` clear of
// every item's box (too_close), trying 30 places; true when it was placed. The scenes
// and the colour scenes (colour_compose.h) both draw their clutter with it.
template <class Items>
bool place_clutter(const Sprite& frag, const Items& items, SceneRng& rng, uint8_t* rgb, int size) {
  for (int t = 0; t < 30; ++t) {
    const int left = int(rng.range(0, size - frag.width)), top = int(rng.range(0, size - frag.height));
    const PixelBox box{left, top, left + frag.width, top + frag.height};
    bool clear = true;
    for (const auto& item : items) clear = clear && !too_close(box, item.box);
    if (!clear) continue;
    composite(frag, rgb, size, size, left, top);
    return true;
  }
  return false;
}

struct SceneItem {
  SceneItemRef ref;
  int class_id = 0;
  PixelBox box;
  int region = 0;
};

struct Scene {
  int size = 0;
  uint8_t background[3] = {0, 0, 0};
  std::vector<uint8_t> rgb;      // [size, size, 3]
  std::vector<SceneItem> items;  // in the order they were placed
  int clutter = 0;               // fragments drawn
};

Scene compose_scene(SceneLibrary& lib, ScenePool pool, int size, double stamp_fraction, SceneRng& rng);

}  // namespace vlm

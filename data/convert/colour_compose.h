// compose_colour_scene: the picture and the items of one scene of the colour-scenes
// converter (convert_colours.cpp; docs/dataset-format.md, "Colour scenes"), a dataset
// made so that the question says where to look and the answer needs fine detail.
// Rules, with slot = size / grid (the canvas is a grid x grid array of square slots):
//  - A size x size RGB canvas of one neutral dark grey (R = G = B, in [16, 64]).
//  - n items, n uniform in [min_items, max_items] (block_items K: n / K uniform in
//    [min_items / K, max_items / K]), each in its own slot (distinct slots drawn
//    uniformly; with K: n / K distinct blocks of 2 x 2 slots drawn uniformly, then K
//    distinct slots in each) and in its own colour of kColourPalette (distinct colours
//    drawn uniformly): a picture of the scene's classes drawn with that tint (sprite.h
//    sprite_from_grey) -- a Fashion-MNIST picture of the pool, or a digit 0-9 in one of
//    kDigitStyles styles (data/image/glyph.h), both uniform -- its longer side uniform in [ceil(0.75 (slot - 2)),
//    slot - 2] pixels, cut to its visible box and placed at a uniform position whose box
//    keeps one pixel from the slot's edges (so no box crosses a slot's edge and boxes are
//    at least 2 pixels apart).
//  - An item's box is its visible box (sprite.h visible_box): half-open, tight, and the
//    one-pixel ring around it is background.
//  - Clutter: 2 x grid^2 tries of a fragment (a crop of 40-70% of each side of a
//    picture of the same classes drawn with a longer side of 0.5-0.9 slots) in a
//    neutral grey (R = G = B, in [96, 176]), placed anywhere at least kSceneGap pixels
//    from every item box (fragments may overlap each other); one that finds no place in
//    30 tries is left out. Clutter is never in a palette colour: only the items are.
//  - Everything is drawn from `rng` alone (scene_rng.h), so a seed gives the same scene.
#pragma once
#include <cstdint>
#include <vector>

#include "data/convert/converters.h"
#include "data/convert/scene_library.h"
#include "data/convert/scene_rng.h"
#include "data/image/sprite.h"

namespace vlm {

struct NamedColour {
  const char* name;
  uint8_t rgb[3];
};
// Saturated colours, pairwise far apart in chromaticity (r, g, b) / (r + g + b), so a
// colour is named by its hue whatever the shading of sprite_from_grey.
inline constexpr int kColourPaletteSize = 6;
inline constexpr NamedColour kColourPalette[kColourPaletteSize] = {
    {"red", {230, 30, 30}},   {"green", {40, 200, 40}},   {"blue", {40, 90, 255}},
    {"yellow", {240, 220, 30}}, {"magenta", {230, 40, 230}}, {"cyan", {30, 210, 220}}};
// The digits' class names ("zero" .. "nine") and answers ("a zero" .. "an eight" ..).
const std::vector<SceneClass>& digit_classes();
inline constexpr int kColourMinSlot = 8;  // pixels: items of at least 6 x 6

struct ColourItem {
  SceneItemRef ref;  // Fashion-MNIST: the picture; digits: index = 10 * style + digit
  int class_id = 0;
  int colour = 0;  // index into kColourPalette
  int slot = 0;    // row * grid + column
  PixelBox box;
};

struct ColourScene {
  int size = 0, grid = 0;
  uint8_t background = 0;          // grey level
  std::vector<uint8_t> rgb;        // [size, size, 3]
  std::vector<ColourItem> items;   // in the order they were placed
  int clutter = 0;                 // fragments drawn
};

// The options as build_colour_scenes checks them (convert_colours.cpp): o.size a multiple
// of o.grid with o.size / o.grid >= kColourMinSlot; kColourMinItems <= o.min_items <=
// o.max_items <= min(kColourPaletteSize, grid^2); o.block_items as ColourSceneOptions
// says. `lib` is read for ColourClasses::Fashion only (may be null for digits).
ColourScene compose_colour_scene(SceneLibrary* lib, const ColourSceneOptions& o, ScenePool pool, SceneRng& rng);

}  // namespace vlm

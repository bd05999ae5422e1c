// Training-time augmentation of a letterboxed S x S RGB image (data.flip, data.shift;
// docs/training.md, "Augmentation"): a horizontal mirror with probability 1/2 and a
// translation by (dx, dy), each in [-shift, shift], the uncovered pixels filled with the
// letterbox background. Each sample's draw depends only on (seed, epoch, caption index),
// so a run sees the same images whatever the loader threads or the DP layout, and a
// resumed run the same as an uninterrupted one. The loader applies it to the training
// split only (train/trainer.cpp), before the texture array is computed, and moves the
// sample's caption box with the pixels. A mirror is wrong for captions that name left
// and right (the scenes datasets ask about positions): it is off by default.
#pragma once
#include <cstdint>

namespace vlm {

struct AugmentOptions {
  bool flip = false;  // mirror left-right with probability 1/2
  int shift = 0;      // translate by up to this many pixels along each axis
  bool any() const { return flip || shift > 0; }
};

// One sample's transformation: mirrored (first), then moved right by dx and down by dy.
struct Augmentation {
  bool flip = false;
  int dx = 0, dy = 0;
  bool identity() const { return !flip && dx == 0 && dy == 0; }
};

Augmentation draw_augmentation(const AugmentOptions& o, uint64_t seed, int64_t epoch, int64_t index);

// Applies `a` in place to packed RGB rgb[S][S][3]; uncovered pixels become `background`.
void apply_augmentation(const Augmentation& a, int S, uint8_t background, uint8_t* rgb);

// A box x0 y0 x1 y1 in pixels of the S x S image, moved as the pixels are (clipped to it).
void augment_box(const Augmentation& a, int S, float box[4]);

}  // namespace vlm

// SceneLibrary: the items the scenes converter (convert_scenes.cpp) places in its
// scenes, their classes and the words that name them (docs/dataset-format.md, "Scenes").
//  - Fashion-MNIST pictures (dataset-fashion-mnist), drawn in a colour the scene picks.
//    Classes 0..9 are the Fashion-MNIST labels. The pictures are split by pool: Test
//    scenes draw from the t10k images; Train and Val scenes from the train images, of
//    which val_fraction (chosen by the seeded permutation) are Val's alone, so no
//    Fashion-MNIST picture appears in two splits.
//  - Tux Paint stamps (tuxpaint-stamps-default), in their own colours and alpha: every
//    *.png whose .txt description's first line is a short noun phrase, "A frog." or
//    "An ankle boot." (an article and 1-3 words); the class is the phrase without its
//    article ("frog"), classes 10.. in name order (a name equal to a Fashion-MNIST
//    class joins it). Stamps are shared by all pools (most classes have one stamp).
//  - Determinism: the library holds no random state; draws take the scene's SceneRng.
//    Stamps are decoded when first rendered and kept shrunk to at most max_side pixels,
//    which gives the same pixels whatever the order of first use.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/convert/scene_rng.h"
#include "data/image/sprite.h"

namespace vlm {

struct SceneClass {
  std::string name;    // "sneaker", "trousers", "frog": "where is the <name>?"
  std::string a_noun;  // "a sneaker", "a pair of trousers", "an owl": the answer to "what is ...?"
  bool plural = false;  // "where are the trousers?"
};

enum class ScenePool { Train = 0, Val = 1, Test = 2 };

struct SceneItemRef {
  bool stamp = false;
  int64_t index = 0;  // a Fashion-MNIST picture (train 0..59999, then t10k) or a stamp
};

class SceneLibrary {
 public:
  // stamps_dir empty: Fashion-MNIST items only. UserError naming the folder when
  // Fashion-MNIST is missing or malformed, or when stamps_dir holds no usable stamp.
  SceneLibrary(const std::string& fashion_dir, const std::string& stamps_dir, double val_fraction, uint64_t seed,
               int max_side);

  const std::vector<SceneClass>& classes() const { return classes_; }
  std::vector<std::string> class_names() const;
  int64_t num_stamps() const { return int64_t(stamps_.size()); }
  bool pool_empty(ScenePool p) const { return pools_[int(p)].empty(); }
  // A random item of the pool: a stamp with probability stamp_fraction (when there are
  // stamps), otherwise a Fashion-MNIST picture of the pool.
  SceneItemRef draw(ScenePool pool, double stamp_fraction, SceneRng& rng) const;
  int class_of(const SceneItemRef& item) const;
  // The item as a sprite whose longer side is `side` pixels (Fashion-MNIST pictures in
  // `tint`); empty for a stamp that cannot be decoded (warned about once).
  Sprite render(const SceneItemRef& item, int side, const uint8_t tint[3]);

 private:
  struct Stamp {
    std::string png;
    int class_id = 0;
    bool loaded = false;
    Sprite sprite;  // empty when not decodable
  };
  const Stamp& stamp(int64_t i);

  std::vector<uint8_t> fm_pixels_;  // [n, 28, 28]
  std::vector<uint8_t> fm_labels_;  // [n]
  std::vector<int64_t> pools_[3];   // Fashion-MNIST picture indices of each pool
  std::vector<Stamp> stamps_;
  std::vector<SceneClass> classes_;
  int max_side_ = 0;
};

}  // namespace vlm

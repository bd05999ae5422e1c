// The colour-scenes converter (data/convert/converters.h build_colour_scenes), items of
// digits (data/image/glyph.h) and of the Debian Fashion-MNIST (dataset-fashion-mnist;
// those cases skipped when absent), checked against the pixels decoded by OpenCV
// (tests/data/colour_scene_check.h; the background is the most frequent colour):
//  - reproducible: the same options give a byte-identical file, another seed another;
//  - the background is one neutral grey and every pixel outside the item boxes is
//    neutral (R = G = B: clutter is grey), so the only coloured pixels are the items';
//  - every box is tight (each edge line holds a non-background pixel, the one-pixel ring
//    around it is background) and inside one slot of the grid, one item per slot;
//  - colours: each question names a colour of the palette (this test's own list of
//    names and values), the brightest pixel of the box has that colour's chromaticity
//    (nearest of the palette), and the colours of one scene are distinct;
//  - answers consistent: the answer is the article and name of the caption's label
//    (the digits' or Fashion-MNIST's 10 classes), min_items..max_items questions per scene, one
//    per item; digit items show the digit their label names (their pixels against every
//    digit's drawings at 16 x 16: the label's is the nearest for at least 95% of them);
//  - colour-last questions ("which item is red" -> "seven") pass the same checks and
//    keep the scenes, boxes, labels and splits of the sentence questions;
//  - scenes of one item;
//  - splits disjoint and covering; the loader delivers boxes, labels and prompts;
//  - bad options (a grid that does not divide the size, too many or too few items) are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"
#include "data/load/loader.h"
#include "data/storage/dataset.h"
#include "test_util.h"
#include "tests/data/colour_scene_check.h"

using namespace vlm;
using test::check_colour_scenes;
using test::kDocumentedPalette;

namespace {

std::string build(const std::string& out, int64_t n, uint64_t seed, int size, int grid, int items,
                  ColourClasses classes = ColourClasses::Digits, int min_items = ColourSceneOptions{}.min_items,
                  int block_items = 0, ColourQuestion question = ColourQuestion::Sentence) {
  ColourSceneOptions so;
  so.size = size, so.grid = grid, so.min_items = min_items, so.max_items = items, so.classes = classes;
  so.block_items = block_items, so.question = question;
  so.fashion_dir = test::kFashionDir;
  const BuildReport r = build_colour_scenes(so, test::small_build(out, n, seed));
  EXPECT_EQ(r.images, n);
  return out;
}

class ColourScenes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("colour_scenes");
    build(dir_ + "/a.h5", 60, 3, 64, 4, 4);
  }
  static std::string dir_;
};
std::string ColourScenes::dir_;

}  // namespace

TEST(ColourPalette, HeaderAgreesWithTheDocumentedPalette) {
  ASSERT_EQ(size_t(kColourPaletteSize), kDocumentedPalette.size());
  for (int k = 0; k < kColourPaletteSize; ++k) {
    EXPECT_EQ(kColourPalette[k].name, kDocumentedPalette[size_t(k)].name);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(int(kColourPalette[k].rgb[c]), kDocumentedPalette[size_t(k)].rgb[size_t(c)]);
  }
}

TEST_F(ColourScenes, SameSeedSameBytesOtherSeedOtherScenes) {
  build(dir_ + "/b.h5", 60, 3, 64, 4, 4);
  build(dir_ + "/c.h5", 60, 4, 64, 4, 4);
  EXPECT_EQ(test::read_file(dir_ + "/a.h5"), test::read_file(dir_ + "/b.h5"));
  const DatasetReader a(dir_ + "/a.h5"), c(dir_ + "/c.h5");
  EXPECT_NE(a.image_data(0), c.image_data(0));
}

TEST_F(ColourScenes, PixelsBoxesColoursAnswersAndSplits) {
  int64_t m = 0;
  check_colour_scenes(dir_ + "/a.h5", 64, 4, 4, &m);
  EXPECT_GE(m, 60 * 2);
  EXPECT_LE(m, 60 * 4);
}

TEST_F(ColourScenes, OtherGridsAndSizes) {
  check_colour_scenes(build(dir_ + "/g3.h5", 20, 9, 96, 3, 6), 96, 3, 6);
  check_colour_scenes(build(dir_ + "/g8.h5", 20, 9, 128, 8, 2), 128, 8, 2);
}

TEST_F(ColourScenes, FixedItemCount) {
  int64_t m = 0;
  check_colour_scenes(build(dir_ + "/six.h5", 20, 9, 64, 4, 6, ColourClasses::Digits, 6), 64, 4, 6, &m, 6);
  EXPECT_EQ(m, 20 * 6);
}

// One item per scene (--data.colour_items 1 --data.colour_min_items 1, a curriculum for
// the colour scenes: docs/lod-experiment.md): one question per scene, every check above.
TEST_F(ColourScenes, OneItemPerScene) {
  int64_t m = 0;
  check_colour_scenes(build(dir_ + "/one.h5", 20, 9, 64, 4, 1, ColourClasses::Digits, 1), 64, 4, 1, &m, 1);
  EXPECT_EQ(m, 20);
}

// --data.colour_question colour_last: "which item is red" -> "seven", every check above,
// and the scenes, boxes and labels of the sentence questions' file of the same seed.
TEST_F(ColourScenes, ColourLastQuestions) {
  int64_t m = 0;
  const std::string p = build(dir_ + "/last.h5", 60, 3, 64, 4, 4, ColourClasses::Digits, ColourSceneOptions{}.min_items,
                              0, ColourQuestion::ColourLast);
  check_colour_scenes(p, 64, 4, 4, &m, ColourSceneOptions{}.min_items, ColourQuestion::ColourLast);
  const DatasetReader last(p), sentence(dir_ + "/a.h5");
  ASSERT_EQ(last.num_images(), sentence.num_images());
  ASSERT_EQ(last.num_captions(), sentence.num_captions());
  for (int64_t i = 0; i < last.num_images(); ++i) EXPECT_EQ(last.image_data(i), sentence.image_data(i)) << i;
  EXPECT_EQ(last.caption_labels(), sentence.caption_labels());
  for (const char* split : {"train", "val", "test"}) EXPECT_EQ(last.split(split), sentence.split(split)) << split;
  for (int64_t j = 0; j < last.num_captions(); ++j) {
    EXPECT_EQ(last.caption_image(j), sentence.caption_image(j));
    EXPECT_EQ(last.box(j).x0, sentence.box(j).x0);
    EXPECT_EQ(last.box(j).y1, sentence.box(j).y1);
  }
}

// --data.colour_block_items 2: every block of 2 x 2 slots holds 0 or 2 items (their
// boxes' slots), and the file passes every other check.
TEST_F(ColourScenes, ItemsTwoToABlock) {
  const int size = 64, grid = 4, slot = size / grid;
  int64_t m = 0;
  const std::string path = build(dir_ + "/blocks.h5", 30, 11, size, grid, 4, ColourClasses::Digits, 2, 2);
  check_colour_scenes(path, size, grid, 4, &m, 2);
  const DatasetReader r(path);
  std::map<int64_t, std::map<int, int>> per_block;  // image -> block -> items
  for (int64_t j = 0; j < r.num_captions(); ++j) {
    const CaptionBox b = r.box(j);
    const int sx = b.x0 / slot, sy = b.y0 / slot;
    ++per_block[r.caption_image(j)][(sy / 2) * (grid / 2) + sx / 2];
  }
  ASSERT_EQ(per_block.size(), 30u);
  int scenes_of_4 = 0;
  for (const auto& [image, blocks] : per_block) {
    int items = 0;
    for (const auto& [block, k] : blocks) {
      EXPECT_EQ(k, 2) << "image " << image << " block " << block;
      items += k;
    }
    scenes_of_4 += items == 4;
  }
  EXPECT_GT(scenes_of_4, 0);  // 2 or 4 items, both drawn
  EXPECT_LT(scenes_of_4, 30);
}

TEST_F(ColourScenes, FashionMnistItems) {
  if (!test::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  int64_t m = 0;
  check_colour_scenes(build(dir_ + "/fashion.h5", 40, 5, 64, 4, 4, ColourClasses::Fashion), 64, 4, 4, &m);
  EXPECT_GE(m, 40 * 2);
}

TEST_F(ColourScenes, LoaderDeliversBoxesLabelsAndPrompts) {
  const DatasetReader r(dir_ + "/a.h5");
  std::vector<std::string> texts;
  for (int64_t j = 0; j < r.num_captions(); ++j) texts.push_back(r.prompt(j)), texts.push_back(r.caption(j));
  LoaderOptions o;
  o.path = dir_ + "/a.h5";
  o.split = "all";
  o.batch_size = 16;
  o.image_size = 64;
  o.grid = 4;
  o.threads = 1;
  o.texture = false;
  o.tokenizer = std::make_shared<Tokenizer>(Tokenizer::train(texts, 300));
  Loader l(o);
  for (int step = 0; step < 3; ++step) {
    const Batch b = l.next();
    ASSERT_EQ(b.boxes.size(), size_t(b.size()) * 4);
    size_t pat = 0;
    for (int k = 0; k < b.size(); ++k) {
      const int64_t j = b.caption_index[size_t(k)];
      const CaptionBox box = r.box(j);
      EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k)], float(box.x0));
      EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k + 3)], float(box.y1));
      EXPECT_EQ(b.labels[size_t(k)], r.caption_labels()[size_t(j)]);
      const int32_t pl = b.prompt_lengths[size_t(k)];
      const std::vector<int32_t> p(b.prompt_tokens.begin() + int64_t(pat),
                                   b.prompt_tokens.begin() + int64_t(pat + size_t(pl)));
      EXPECT_EQ(o.tokenizer->decode(p), r.prompt(j));
      pat += size_t(pl);
    }
  }
}

TEST_F(ColourScenes, BadOptionsAreRefused) {
  struct Case {
    int size, grid, items, min_items;
    std::string what;
    int block_items = 0;
  };
  for (const Case& c :
       {Case{64, 5, 4, 2, "--data.scene_size"}, Case{32, 8, 4, 2, "--data.scene_size"},
        Case{64, 4, 7, 2, "--data.colour_items"}, Case{64, 1, 2, 2, "--data.colour_items"},
        Case{64, 4, 0, 1, "--data.colour_items"}, Case{64, 4, 4, 5, "--data.colour_min_items"},
        Case{64, 4, 4, 0, "--data.colour_min_items"}, Case{64, 4, 1, 2, "--data.colour_min_items"}, Case{64, 4, 3, 2, "--data.colour_block_items", 2},
        Case{64, 4, 4, 2, "--data.colour_block_items", 5}, Case{48, 3, 4, 2, "--data.colour_block_items", 2},
        Case{32, 2, 4, 4, "--data.colour_items", 2}}) {
    SCOPED_TRACE(c.what);
    try {
      build(dir_ + "/bad.h5", 5, 1, c.size, c.grid, c.items, ColourClasses::Digits, c.min_items, c.block_items);
      ADD_FAILURE() << "accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad.h5"));
}

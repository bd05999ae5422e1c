// The colour-scenes converter (data/convert/converters.h build_colour_scenes), items of
// digits (data/image/glyph.h) and of the Debian Fashion-MNIST (dataset-fashion-mnist;
// those cases skipped when absent), checked against the pixels decoded by OpenCV (the
// background is the most frequent colour):
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

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "base/error.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"
#include "data/image/glyph.h"
#include "data/load/loader.h"
#include "data/storage/dataset.h"
#include "test_util.h"

using namespace vlm;

namespace {

struct Named {
  std::string name;
  std::array<int, 3> rgb;
};
// The palette as docs/dataset-format.md states it (independent of the header's table).
const std::vector<Named> kPalette = {{"red", {230, 30, 30}},     {"green", {40, 200, 40}},
                                     {"blue", {40, 90, 255}},     {"yellow", {240, 220, 30}},
                                     {"magenta", {230, 40, 230}}, {"cyan", {30, 210, 220}}};
const std::vector<std::string> kFashionNouns = {"a T-shirt", "a pair of trousers", "a pullover", "a dress",
                                                "a coat",    "a sandal",           "a shirt",    "a sneaker",
                                                "a bag",     "an ankle boot"};
const std::vector<std::string> kFashionNames = {"T-shirt", "trousers", "pullover", "dress", "coat",
                                                "sandal",  "shirt",    "sneaker",  "bag",   "ankle boot"};
const std::vector<std::string> kDigitNouns = {"a zero", "a one", "a two",   "a three", "a four",
                                              "a five", "a six", "a seven", "an eight", "a nine"};
const std::vector<std::string> kDigitNames = {"zero", "one", "two", "three", "four",
                                              "five", "six", "seven", "eight", "nine"};

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

// The palette entry nearest to the chromaticity of (r, g, b).
int nearest_colour(const cv::Vec3b& bgr) {
  const double s = double(bgr[0]) + bgr[1] + bgr[2];
  int best = -1;
  double bd = 1e9;
  for (size_t k = 0; k < kPalette.size(); ++k) {
    const auto& c = kPalette[k].rgb;
    const double cs = double(c[0]) + c[1] + c[2];
    const double d = std::hypot(bgr[2] / s - c[0] / cs, bgr[1] / s - c[1] / cs, bgr[0] / s - c[2] / cs);
    if (d < bd) bd = d, best = int(k);
  }
  return best;
}

// The digit whose drawing (data/image/glyph.h, every style, at the box's longer side) is
// nearest to the item's pixels (grey = max channel - background), both shrunk to 16 x 16
// and normalised.
int nearest_digit(const cv::Mat& m, const CaptionBox& b, int bg) {
  const int w = b.x1 - b.x0, h = b.y1 - b.y0;
  cv::Mat item(h, w, CV_32F);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const cv::Vec3b p = m.at<cv::Vec3b>(b.y0 + y, b.x0 + x);
      item.at<float>(y, x) = float(std::max(0, int(std::max({p[0], p[1], p[2]})) - bg));
    }
  auto shrunk = [](const cv::Mat& a) {
    cv::Mat r;
    cv::resize(a, r, cv::Size(16, 16), 0, 0, cv::INTER_AREA);
    return r / std::max(1e-6, cv::norm(r));
  };
  const cv::Mat it = shrunk(item);
  int best = -1;
  double bd = 1e9;
  for (int digit = 0; digit < 10; ++digit)
    for (int style = 0; style < kDigitStyles; ++style) {
      const GreyPicture g = digit_picture(digit, style, std::max(w, h));
      cv::Mat t;
      cv::Mat(g.height, g.width, CV_8U, const_cast<uint8_t*>(g.px.data())).convertTo(t, CV_32F);
      const double d = cv::norm(shrunk(t) - it);
      if (d < bd) bd = d, best = digit;
    }
  return best;
}

void check_file(const std::string& path, int size, int grid, int max_items, int64_t* captions = nullptr,
                int min_items = ColourSceneOptions{}.min_items, ColourQuestion question = ColourQuestion::Sentence) {
  const bool last = question == ColourQuestion::ColourLast;
  int64_t digit_items = 0, digit_matches = 0;
  DatasetReader r(path);
  EXPECT_EQ(r.version(), 2);
  ASSERT_TRUE(r.has_boxes());
  const auto& labels = r.caption_labels();
  const auto& names = r.caption_class_names();
  const bool digits = !names.empty() && names[0] == "zero";
  EXPECT_EQ(names, digits ? kDigitNames : kFashionNames);
  const std::vector<std::string>& nouns = digits ? kDigitNouns : kFashionNouns;
  const int slot = size / grid;
  std::vector<std::vector<int64_t>> caps(size_t(r.num_images()));
  for (int64_t j = 0; j < r.num_captions(); ++j) caps[size_t(r.caption_image(j))].push_back(j);
  for (int64_t i = 0; i < r.num_images(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i));
    const cv::Mat m = cv::imdecode(r.image_data(i), cv::IMREAD_COLOR);
    ASSERT_EQ(m.rows, size);
    ASSERT_EQ(m.cols, size);
    std::map<uint32_t, int> hist;
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
        ++hist[uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]];
      }
    uint32_t bgc = hist.begin()->first;
    for (const auto& [c, k] : hist)
      if (k > hist[bgc]) bgc = c;
    const cv::Vec3b bg(uchar(bgc >> 16), uchar(bgc >> 8), uchar(bgc));
    EXPECT_TRUE(bg[0] == bg[1] && bg[1] == bg[2]) << "background not grey";
    auto is_bg = [&](int x, int y) { return m.at<cv::Vec3b>(y, x) == bg; };

    const std::vector<int64_t>& cj = caps[size_t(i)];
    EXPECT_GE(cj.size(), size_t(min_items));
    EXPECT_LE(cj.size(), size_t(max_items));
    std::vector<uint8_t> in_box(size_t(size) * size, 0);
    std::set<int> colours, slots;
    for (int64_t j : cj) {
      const CaptionBox b = r.box(j);
      const std::string prompt = r.prompt(j), answer = r.caption(j);
      ASSERT_TRUE(0 <= b.x0 && b.x0 < b.x1 && b.x1 <= size && 0 <= b.y0 && b.y0 < b.y1 && b.y1 <= size);
      // One slot, one pixel from its edges; one item per slot.
      const int sx = b.x0 / slot, sy = b.y0 / slot;
      EXPECT_TRUE(b.x0 >= sx * slot + 1 && b.x1 <= (sx + 1) * slot - 1 && b.y0 >= sy * slot + 1 &&
                  b.y1 <= (sy + 1) * slot - 1)
          << "caption " << j << ": box not inside one slot";
      EXPECT_TRUE(slots.insert(sy * grid + sx).second) << "two items in one slot";
      // Tight.
      bool edge[4] = {};
      cv::Vec3b brightest = bg;
      for (int y = b.y0; y < b.y1; ++y)
        for (int x = b.x0; x < b.x1; ++x) {
          in_box[size_t(y * size + x)] = 1;
          if (is_bg(x, y)) continue;
          const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
          if (int(p[0]) + p[1] + p[2] > int(brightest[0]) + brightest[1] + brightest[2]) brightest = p;
          edge[0] |= x == b.x0, edge[1] |= x == b.x1 - 1, edge[2] |= y == b.y0, edge[3] |= y == b.y1 - 1;
        }
      EXPECT_TRUE(edge[0] && edge[1] && edge[2] && edge[3]) << "caption " << j << ": box not tight";
      for (int y = b.y0 - 1; y <= b.y1; ++y)
        for (int x = b.x0 - 1; x <= b.x1; ++x) {
          const bool ring = y == b.y0 - 1 || y == b.y1 || x == b.x0 - 1 || x == b.x1;
          if (ring && x >= 0 && y >= 0 && x < size && y < size) {
            ASSERT_TRUE(is_bg(x, y)) << "caption " << j << ": pixel (" << x << ", " << y << ") next to the box";
          }
        }
      // The colour the question names is the item's.
      int named = -1;
      for (size_t k = 0; k < kPalette.size(); ++k)
        if (last ? prompt == "which item is " + kPalette[k].name
                 : prompt == "what is the " + kPalette[k].name + " item?" ||
                       prompt == "which item is " + kPalette[k].name + "?")
          named = int(k);
      ASSERT_GE(named, 0) << "caption " << j << ": " << prompt;
      EXPECT_EQ(nearest_colour(brightest), named) << "caption " << j << ": " << prompt;
      EXPECT_TRUE(colours.insert(named).second) << "two items of one colour";
      // The answer is the label's noun (its name with colour-last questions).
      const int label = labels[size_t(j)];
      ASSERT_TRUE(label >= 0 && label < 10);
      EXPECT_EQ(answer, last ? names[size_t(label)] : nouns[size_t(label)]);
      if (digits) ++digit_items, digit_matches += nearest_digit(m, b, bg[0]) == label;
    }
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x)
        if (!in_box[size_t(y * size + x)]) {
          const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
          ASSERT_TRUE(p[0] == p[1] && p[1] == p[2]) << "a coloured pixel outside the items at (" << x << ", " << y << ")";
        }
  }
  const int64_t n = r.num_images();
  std::vector<int> seen(size_t(n), 0);
  for (const char* s : {"train", "val", "test"})
    for (int64_t i : r.split(s)) ++seen[size_t(i)];
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "image " << i;
  EXPECT_EQ(int64_t(r.split("val").size()), n / 10);
  EXPECT_EQ(int64_t(r.split("test").size()), n / 5);
  if (captions) *captions = r.num_captions();
  // The items are the digits their labels name (a template match at 16 x 16 pixels: all
  // but a rare odd drawing).
  if (digits) {
    EXPECT_GE(double(digit_matches), 0.95 * double(digit_items)) << digit_matches << " of " << digit_items;
  }
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
  ASSERT_EQ(size_t(kColourPaletteSize), kPalette.size());
  for (int k = 0; k < kColourPaletteSize; ++k) {
    EXPECT_EQ(kColourPalette[k].name, kPalette[size_t(k)].name);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(int(kColourPalette[k].rgb[c]), kPalette[size_t(k)].rgb[size_t(c)]);
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
  check_file(dir_ + "/a.h5", 64, 4, 4, &m);
  EXPECT_GE(m, 60 * 2);
  EXPECT_LE(m, 60 * 4);
}

TEST_F(ColourScenes, OtherGridsAndSizes) {
  check_file(build(dir_ + "/g3.h5", 20, 9, 96, 3, 6), 96, 3, 6);
  check_file(build(dir_ + "/g8.h5", 20, 9, 128, 8, 2), 128, 8, 2);
}

TEST_F(ColourScenes, FixedItemCount) {
  int64_t m = 0;
  check_file(build(dir_ + "/six.h5", 20, 9, 64, 4, 6, ColourClasses::Digits, 6), 64, 4, 6, &m, 6);
  EXPECT_EQ(m, 20 * 6);
}

// One item per scene (--data.colour_items 1 --data.colour_min_items 1, a curriculum for
// the colour scenes: docs/lod-experiment.md): one question per scene, every check above.
TEST_F(ColourScenes, OneItemPerScene) {
  int64_t m = 0;
  check_file(build(dir_ + "/one.h5", 20, 9, 64, 4, 1, ColourClasses::Digits, 1), 64, 4, 1, &m, 1);
  EXPECT_EQ(m, 20);
}

// --data.colour_question colour_last: "which item is red" -> "seven", every check above,
// and the scenes, boxes and labels of the sentence questions' file of the same seed.
TEST_F(ColourScenes, ColourLastQuestions) {
  int64_t m = 0;
  const std::string p = build(dir_ + "/last.h5", 60, 3, 64, 4, 4, ColourClasses::Digits, ColourSceneOptions{}.min_items,
                              0, ColourQuestion::ColourLast);
  check_file(p, 64, 4, 4, &m, ColourSceneOptions{}.min_items, ColourQuestion::ColourLast);
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
  check_file(path, size, grid, 4, &m, 2);
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
  check_file(build(dir_ + "/fashion.h5", 40, 5, 64, 4, 4, ColourClasses::Fashion), 64, 4, 4, &m);
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

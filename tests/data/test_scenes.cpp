// The scenes converter (data/convert/converters.h build_scenes) on the Debian datasets
// (dataset-fashion-mnist, tuxpaint-stamps-default; skipped when absent):
//  - reproducible: the same options give a byte-identical file, another seed another;
//  - boxes checked against the pixels, decoded by OpenCV (the background is the most
//    frequent colour): inside the image, each of the four edge lines of a box holds a
//    pixel that differs from the background and the one-pixel ring around it is all
//    background (so the box is exactly the item's extent), and boxes of one scene keep
//    kSceneGap pixels apart, one per region;
//  - answers agree with boxes and labels by the formula of docs/dataset-format.md (region =
//    the 3 x 3 cell of the box centre): "what is in the <region>?" names the box's
//    region and is answered with the class's noun; "where is the <class>?" is answered
//    with the region of the box, for a class alone in its scene;
//  - splits disjoint and covering with floor(n x fraction) val/test scenes; the
//    Fashion-MNIST pictures of the three pools are disjoint (test = t10k);
//  - the loader delivers each caption's box scaled into the letterboxed image, its
//    label and its prompt tokens.
#include <gtest/gtest.h>

#include <map>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "data/convert/converters.h"
#include "data/convert/scene_compose.h"
#include "data/convert/scene_library.h"
#include "data/load/loader.h"
#include "data/storage/dataset.h"
#include "test_util.h"

using namespace vlm;

namespace {

const char* const kRegions[9] = {"top left",    "top middle",  "top right",     "middle left", "center",
                                 "middle right", "bottom left", "bottom middle", "bottom right"};

bool have_inputs() { return test::have_fashion_mnist() && test::have_tuxpaint(); }

std::string build(const std::string& out, int64_t n, uint64_t seed, int size, double stamp_fraction) {
  SceneOptions so;
  so.size = size;
  so.stamp_fraction = stamp_fraction;
  so.fashion_dir = test::kFashionDir;
  so.stamps_dir = test::kTuxDir;
  const BuildReport r = build_scenes(so, test::small_build(out, n, seed));
  EXPECT_EQ(r.images, n);
  return out;
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

int region(const CaptionBox& b, int w, int h) {  // docs/dataset-format.md: floor(3 (x0 + x1) / (2 W)), rows alike
  const int col = std::min(2, 3 * (b.x0 + b.x1) / (2 * w)), row = std::min(2, 3 * (b.y0 + b.y1) / (2 * h));
  return 3 * row + col;
}

bool apart(const CaptionBox& a, const CaptionBox& b, int gap) {
  return a.x1 + gap <= b.x0 || b.x1 + gap <= a.x0 || a.y1 + gap <= b.y0 || b.y1 + gap <= a.y0;
}

// Every check of the header on one file; *captions = the number of captions checked.
void check_file(const std::string& path, int size, bool stamps, int64_t* captions = nullptr) {
  DatasetReader r(path);
  EXPECT_EQ(r.version(), 2);
  EXPECT_TRUE(r.has_boxes());
  const auto& labels = r.caption_labels();
  const auto& names = r.caption_class_names();
  EXPECT_EQ(int64_t(labels.size()), r.num_captions());
  EXPECT_EQ(names.size() > 10, stamps) << names.size();
  const std::vector<std::string> fashion = {"T-shirt", "trousers", "pullover", "dress", "coat",
                                            "sandal",  "shirt",    "sneaker",  "bag",   "ankle boot"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 10), fashion);

  std::vector<std::vector<int64_t>> caps(size_t(r.num_images()));
  for (int64_t j = 0; j < r.num_captions(); ++j) caps[size_t(r.caption_image(j))].push_back(j);
  for (int64_t i = 0; i < r.num_images(); ++i) {
    SCOPED_TRACE("image " + std::to_string(i));
    const std::vector<uint8_t> bytes = r.image_data(i);
    const cv::Mat m = cv::imdecode(bytes, cv::IMREAD_COLOR);
    EXPECT_EQ(m.rows, size);
    EXPECT_EQ(m.cols, size);
    std::map<uint32_t, int> hist;
    for (int y = 0; y < m.rows; ++y)
      for (int x = 0; x < m.cols; ++x) {
        const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
        ++hist[uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]];
      }
    uint32_t bgc = 0;
    for (const auto& [c, k] : hist)
      if (k > hist[bgc]) bgc = c;
    const cv::Vec3b bg(uchar(bgc >> 16), uchar(bgc >> 8), uchar(bgc));
    auto is_bg = [&](int x, int y) { return m.at<cv::Vec3b>(y, x) == bg; };

    std::map<std::pair<int, int>, CaptionBox> items;  // (x0, y0) -> box: one what-question per item
    std::map<int, int> class_count;
    for (int64_t j : caps[size_t(i)]) {
      const CaptionBox b = r.box(j);
      const std::string prompt = r.prompt(j), answer = r.caption(j);
      ASSERT_TRUE(0 <= b.x0 && b.x0 < b.x1 && b.x1 <= size && 0 <= b.y0 && b.y0 < b.y1 && b.y1 <= size);
      bool edge[4] = {};
      int fg = 0;
      for (int y = b.y0; y < b.y1; ++y)
        for (int x = b.x0; x < b.x1; ++x) {
          if (is_bg(x, y)) continue;
          ++fg;
          edge[0] |= x == b.x0, edge[1] |= x == b.x1 - 1, edge[2] |= y == b.y0, edge[3] |= y == b.y1 - 1;
        }
      EXPECT_TRUE(edge[0] && edge[1] && edge[2] && edge[3]) << "caption " << j << ": box not tight";
      EXPECT_GT(fg, 0);
      for (int y = b.y0 - 1; y <= b.y1; ++y)
        for (int x = b.x0 - 1; x <= b.x1; ++x) {
          const bool ring = y == b.y0 - 1 || y == b.y1 || x == b.x0 - 1 || x == b.x1;
          if (ring && x >= 0 && y >= 0 && x < size && y < size) {
            ASSERT_TRUE(is_bg(x, y)) << "caption " << j << ": pixel (" << x << ", " << y << ") next to the box";
          }
        }
      const int reg = region(b, size, size);
      const int label = labels[size_t(j)];
      ASSERT_TRUE(label >= 0 && size_t(label) < names.size());
      const std::string& name = names[size_t(label)];
      if (std::find(std::begin(kRegions), std::end(kRegions), answer) != std::end(kRegions)) {
        EXPECT_EQ(answer, kRegions[reg]) << prompt;  // where-question
        EXPECT_TRUE(ends_with(prompt, " the " + name + "?")) << prompt;
        EXPECT_EQ(prompt.rfind(name == "trousers" ? "where are" : "where is", 0) == 0 ||
                      prompt.rfind("in which part", 0) == 0,
                  true)
            << prompt;
      } else {
        EXPECT_TRUE(ends_with(prompt, " the " + std::string(kRegions[reg]) + "?")) << prompt;  // what-question
        EXPECT_TRUE(ends_with(answer, name)) << answer << " / " << name;
        EXPECT_TRUE(answer.rfind("a ", 0) == 0 || answer.rfind("an ", 0) == 0) << answer;
        EXPECT_TRUE(items.emplace(std::pair{b.x0, b.y0}, b).second) << "two what-questions about one item";
        ++class_count[label];
      }
    }
    // 2-6 items, one per region, kSceneGap apart; where-questions only for lone classes.
    EXPECT_GE(items.size(), size_t(kSceneMinItems));
    EXPECT_LE(items.size(), size_t(kSceneMaxItems));
    std::set<int> regions;
    for (auto a = items.begin(); a != items.end(); ++a) {
      EXPECT_TRUE(regions.insert(region(a->second, size, size)).second);
      for (auto b = std::next(a); b != items.end(); ++b) EXPECT_TRUE(apart(a->second, b->second, kSceneGap));
    }
    size_t where = 0;
    for (int64_t j : caps[size_t(i)])
      if (std::find(std::begin(kRegions), std::end(kRegions), r.caption(j)) != std::end(kRegions)) {
        ++where;
        EXPECT_EQ(class_count[labels[size_t(j)]], 1);
      }
    size_t lone = 0;
    for (const auto& [c, k] : class_count) lone += k == 1;
    EXPECT_EQ(where, lone);
  }

  // Splits: disjoint, covering, floor(n x 0.1) val and floor(n x 0.2) test scenes.
  test::expect_small_build_splits(r);
  if (captions) *captions = r.num_captions();
}

class Scenes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_inputs()) return;
    dir_ = test::scratch_dir("scenes");
    build(dir_ + "/a.h5", 40, 3, 224, 0.25);
  }
  void SetUp() override {
    if (!have_inputs()) GTEST_SKIP() << "dataset-fashion-mnist or tuxpaint-stamps-default not installed";
  }
  static std::string dir_;
};
std::string Scenes::dir_;

}  // namespace

TEST_F(Scenes, SameSeedSameBytesOtherSeedOtherScenes) {
  build(dir_ + "/b.h5", 40, 3, 224, 0.25);
  build(dir_ + "/c.h5", 40, 4, 224, 0.25);
  EXPECT_EQ(test::read_file(dir_ + "/a.h5"), test::read_file(dir_ + "/b.h5"));
  const DatasetReader a(dir_ + "/a.h5"), c(dir_ + "/c.h5");
  EXPECT_NE(a.image_data(0), c.image_data(0));
}

TEST_F(Scenes, BoxesAnswersLabelsAndSplits) {
  int64_t m = 0;
  check_file(dir_ + "/a.h5", 224, true, &m);
  EXPECT_GE(m, 40 * 3);  // at least 2 what-questions and usually a where-question per scene
}

TEST_F(Scenes, OtherSizesAndNoStamps) {
  check_file(build(dir_ + "/small.h5", 20, 9, 96, 0.0), 96, false);
  check_file(build(dir_ + "/odd.h5", 20, 9, 301, 0.6), 301, true);
}

TEST_F(Scenes, LibraryPoolsAreDisjoint) {
  SceneLibrary lib(test::kFashionDir, test::kTuxDir, 0.1, 5, 64);
  SceneRng rng(1, 2);
  std::set<int64_t> seen[3];
  for (int p = 0; p < 3; ++p)
    for (int k = 0; k < 3000; ++k) {
      const SceneItemRef it = lib.draw(ScenePool(p), 0.0, rng);
      ASSERT_FALSE(it.stamp);
      seen[p].insert(it.index);
    }
  for (int64_t i : seen[0]) EXPECT_TRUE(i < 60000 && !seen[1].count(i));
  for (int64_t i : seen[1]) EXPECT_LT(i, 60000);
  for (int64_t i : seen[2]) EXPECT_GE(i, 60000);
  EXPECT_GT(seen[1].size(), 2000u);  // the 6000 val pictures, sampled 3000 times
  // Stamps: classes from 10 on (or a Fashion-MNIST class of the same name), all named.
  for (int k = 0; k < 200; ++k) {
    const SceneItemRef it = lib.draw(ScenePool::Test, 1.0, rng);
    ASSERT_TRUE(it.stamp);
    EXPECT_LT(size_t(lib.class_of(it)), lib.classes().size());
  }
  EXPECT_GT(lib.num_stamps(), 100);
}

TEST_F(Scenes, LoaderDeliversBoxesLabelsAndPrompts) {
  const DatasetReader r(dir_ + "/a.h5");
  std::vector<std::string> texts;
  for (int64_t j = 0; j < r.num_captions(); ++j) texts.push_back(r.prompt(j)), texts.push_back(r.caption(j));
  for (int S : {224, 112}) {
    LoaderOptions o;
    o.path = dir_ + "/a.h5";
    o.split = "all";
    o.batch_size = 16;
    o.image_size = S;
    o.grid = 4;
    o.threads = 1;
    o.texture = false;
    o.tokenizer = std::make_shared<Tokenizer>(Tokenizer::train(texts, 300));
    Loader l(o);
    for (int step = 0; step < 3; ++step) {
      const Batch b = l.next();
      ASSERT_EQ(b.boxes.size(), size_t(b.size()) * 4);
      ASSERT_EQ(b.labels.size(), size_t(b.size()));
      size_t pat = 0;
      for (int k = 0; k < b.size(); ++k) {
        const int64_t j = b.caption_index[size_t(k)];
        const CaptionBox box = r.box(j);
        const float f = float(S) / 224.0f;  // a square scene fills the S x S image
        EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k)], f * float(box.x0));
        EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k + 1)], f * float(box.y0));
        EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k + 2)], f * float(box.x1));
        EXPECT_FLOAT_EQ(b.boxes[size_t(4 * k + 3)], f * float(box.y1));
        EXPECT_EQ(b.labels[size_t(k)], r.caption_labels()[size_t(j)]);
        const int32_t pl = b.prompt_lengths[size_t(k)];
        const std::vector<int32_t> p(b.prompt_tokens.begin() + int64_t(pat), b.prompt_tokens.begin() + int64_t(pat + size_t(pl)));
        EXPECT_EQ(o.tokenizer->decode(p), r.prompt(j));
        pat += size_t(pl);
      }
    }
  }
}

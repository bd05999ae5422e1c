// The check of a colour-scenes file (tests/data/colour_scene_check.h).
#include "tests/data/colour_scene_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "data/image/glyph.h"
#include "data/storage/dataset.h"
#include "tests/data/test_util.h"

namespace vlm::test {

const std::vector<NamedColour> kDocumentedPalette = {{"red", {230, 30, 30}},     {"green", {40, 200, 40}},
                                     {"blue", {40, 90, 255}},     {"yellow", {240, 220, 30}},
                                     {"magenta", {230, 40, 230}}, {"cyan", {30, 210, 220}}};

namespace {

const std::vector<std::string> kFashionNouns = {"a T-shirt", "a pair of trousers", "a pullover", "a dress",
                                                "a coat",    "a sandal",           "a shirt",    "a sneaker",
                                                "a bag",     "an ankle boot"};
const std::vector<std::string> kFashionNames = {"T-shirt", "trousers", "pullover", "dress", "coat",
                                                "sandal",  "shirt",    "sneaker",  "bag",   "ankle boot"};
const std::vector<std::string> kDigitNouns = {"a zero", "a one", "a two",   "a three", "a four",
                                              "a five", "a six", "a seven", "an eight", "a nine"};
const std::vector<std::string> kDigitNames = {"zero", "one", "two", "three", "four",
                                              "five", "six", "seven", "eight", "nine"};

// The palette entry nearest to the chromaticity of (r, g, b).
int nearest_colour(const cv::Vec3b& bgr) {
  const double s = double(bgr[0]) + bgr[1] + bgr[2];
  int best = -1;
  double bd = 1e9;
  for (size_t k = 0; k < kDocumentedPalette.size(); ++k) {
    const auto& c = kDocumentedPalette[k].rgb;
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

}  // namespace

void check_colour_scenes(const std::string& path, int size, int grid, int max_items, int64_t* captions, int min_items,
                         ColourQuestion question) {
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
      for (size_t k = 0; k < kDocumentedPalette.size(); ++k)
        if (last ? prompt == "which item is " + kDocumentedPalette[k].name
                 : prompt == "what is the " + kDocumentedPalette[k].name + " item?" ||
                       prompt == "which item is " + kDocumentedPalette[k].name + "?")
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
  expect_small_build_splits(r);
  if (captions) *captions = r.num_captions();
  // The items are the digits their labels name (a template match at 16 x 16 pixels: all
  // but a rare odd drawing).
  if (digits) {
    EXPECT_GE(double(digit_matches), 0.95 * double(digit_items)) << digit_matches << " of " << digit_items;
  }
}

}  // namespace vlm::test

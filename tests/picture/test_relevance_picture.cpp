// The relevance picture (picture/relevance_picture.h): colours follow the relevance
// (JET: red where high, blue where low, blended with the image), the LOD grid lines
// fall on the token squares' boundaries, the PNG reads back equal to the rendering, and
// an unwritable path is a one-line UserError naming it.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "base/error.h"
#include "picture/relevance_picture.h"
#include "tests/support/files.h"

namespace vlm::test {
namespace {

TEST(RelevancePicture, HeatmapGridAndFile) {
  const int H = 64, W = 64, G = 8, R = 4;
  std::vector<uint8_t> grey(size_t(H * W * 3), 128);
  std::vector<float> rel(size_t(G * G), 0.f);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) rel[size_t(y * G + x)] = 1.f;  // top-left region relevant
  const std::vector<int32_t> levels{2, 0, 0, 1};                // 16 + 1 + 1 + 4 tokens
  const ImageView img = ImageView::packed(grey.data(), H, W);
  const RelevanceGrid grid{rel.data(), G, levels.data(), R};
  const std::vector<uint8_t> pic = render_relevance(img, grid);
  ASSERT_EQ(pic.size(), grey.size());
  auto at = [&](int y, int x, int c) { return int(pic[size_t((y * W + x) * 3 + c)]); };
  // inside cells (away from lines): high relevance is red, low is blue
  EXPECT_GT(at(3, 3, 0), at(3, 3, 2) + 40);
  EXPECT_GT(at(3, 35, 2), at(3, 35, 0) + 40);
  // level-2 region: a line at every cell boundary (pixel 8 = cell 1); the level-0 region
  // to its right has no line inside (pixel 40 = cell 5)
  EXPECT_EQ(at(3, 8, 0), 255);
  EXPECT_EQ(at(3, 8, 1), 255);
  EXPECT_NE(at(3, 40, 1), 255);
  // level-1 region (bottom right): a line at its half (cell 6 = pixel 48), none at cell 5
  EXPECT_EQ(at(44, 48, 1), 255);
  EXPECT_NE(at(44, 40, 1), 255);
  const std::string dir = scratch_dir("relevance_picture");
  const std::string path = dir + "/r.png";
  write_relevance_png(path, img, grid);
  cv::Mat back = cv::imread(path, cv::IMREAD_COLOR);
  ASSERT_EQ(back.rows, H);
  ASSERT_EQ(back.cols, W);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(int(back.at<cv::Vec3b>(y, x)[2 - c]), at(y, x, c));
  try {
    write_relevance_png(dir + "/no/such/dir/r.png", img, grid);
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no/such/dir/r.png"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace vlm::test

// The relevance picture (picture/relevance_picture.h), drawn with OpenCV.
#include "picture/relevance_picture.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>

#include "base/error.h"

namespace vlm {

std::vector<uint8_t> render_relevance(const ImageView& image, const RelevanceGrid& g) {
  const int H = image.height, W = image.width, G = g.G;
  VLM_REQUIRE(G >= 1 && H >= G && W >= G, "relevance picture: image ", W, "x", H, " smaller than the grid G = ", G);
  VLM_ASSERT(g.relevance != nullptr && g.region >= 1 && G % g.region == 0, "relevance picture: bad grid");
  cv::Mat heat(G, G, CV_8UC1);
  for (int i = 0; i < G * G; ++i)
    heat.data[i] = uint8_t(std::clamp(g.relevance[i], 0.f, 1.f) * 255.f + 0.5f);
  cv::Mat big, colour;  // colour is BGR
  cv::resize(heat, big, cv::Size(W, H), 0, 0, cv::INTER_NEAREST);
  cv::applyColorMap(big, colour, cv::COLORMAP_JET);
  std::vector<uint8_t> out(size_t(H) * W * 3);
  for (int y = 0; y < H; ++y) {
    const uint8_t* src = image.row(y);
    const uint8_t* c = colour.ptr<uint8_t>(y);
    uint8_t* o = out.data() + size_t(y) * W * 3;
    for (int x = 0; x < W; ++x)
      for (int ch = 0; ch < 3; ++ch)  // RGB out, BGR colour map
        o[x * 3 + ch] = uint8_t((int(src[x * 3 + ch]) + int(c[x * 3 + 2 - ch]) + 1) / 2);
  }
  if (g.levels != nullptr) {
    cv::Mat m(H, W, CV_8UC3, out.data());
    const int R = g.region, RG = G / R;
    auto px = [&](int cell, int n) { return int(int64_t(cell) * n / G); };
    for (int reg = 0; reg < RG * RG; ++reg) {
      const int side = R >> std::clamp(int(g.levels[reg]), 0, 30), ry = (reg / RG) * R, rx = (reg % RG) * R;
      for (int y = ry; y < ry + R; y += std::max(side, 1))
        for (int x = rx; x < rx + R; x += std::max(side, 1))
          cv::rectangle(m, cv::Point(px(x, W), px(y, H)), cv::Point(px(x + side, W) - 1, px(y + side, H) - 1),
                        cv::Scalar(255, 255, 255), 1);
    }
  }
  return out;
}

void write_relevance_png(const std::string& path, const ImageView& image, const RelevanceGrid& grid) {
  std::vector<uint8_t> rgb = render_relevance(image, grid);
  cv::Mat m(image.height, image.width, CV_8UC3, rgb.data()), bgr;
  cv::cvtColor(m, bgr, cv::COLOR_RGB2BGR);
  bool ok = false;
  try {
    ok = cv::imwrite(path, bgr);
  } catch (const cv::Exception&) {
    ok = false;
  }
  VLM_REQUIRE(ok, path, ": cannot write the relevance picture (PNG)");
}

}  // namespace vlm

// Digits drawn with OpenCV's Hershey fonts (data/image/glyph.h).
#include "data/image/glyph.h"

#include <algorithm>
#include <opencv2/imgproc.hpp>
#include <string>

#include "base/error.h"

namespace vlm {

GreyPicture digit_picture(int digit, int style, int side) {
  VLM_ASSERT(digit >= 0 && digit <= 9 && style >= 0 && style < kDigitStyles && side >= 1, "digit_picture: digit ",
             digit, " style ", style, " side ", side);
  static const int kFonts[4] = {cv::FONT_HERSHEY_SIMPLEX, cv::FONT_HERSHEY_DUPLEX, cv::FONT_HERSHEY_COMPLEX,
                                cv::FONT_HERSHEY_TRIPLEX};
  const int font = kFonts[style % 4], thickness = 3 + 2 * (style / 4);
  cv::Mat m(96, 96, CV_8UC1, cv::Scalar(0));
  cv::putText(m, std::string(1, char('0' + digit)), {20, 78}, font, 2.4, cv::Scalar(255), thickness, cv::LINE_AA);
  const cv::Rect box = cv::boundingRect(m);
  VLM_ASSERT(box.width > 0 && box.height > 0, "digit_picture: nothing drawn");
  const cv::Mat cut = m(box);
  const double f = double(side) / std::max(box.width, box.height);
  const int h = std::max(1, int(box.height * f + 0.5)), w = std::max(1, int(box.width * f + 0.5));
  cv::Mat small;
  cv::resize(cut, small, cv::Size(w, h), 0, 0, cv::INTER_AREA);
  GreyPicture g;
  g.height = h, g.width = w;
  g.px.assign(small.datastart, small.dataend);
  if (!small.isContinuous()) {
    g.px.clear();
    for (int y = 0; y < h; ++y) g.px.insert(g.px.end(), small.ptr<uint8_t>(y), small.ptr<uint8_t>(y) + w);
  }
  return g;
}

}  // namespace vlm

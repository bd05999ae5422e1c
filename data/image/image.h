// RGB images as the image pipeline (image_pipeline.h) and the texture array (texture.h)
// pass them: 8-bit, 3 channels in R, G, B order, row y starting `stride` bytes after
// row y-1 (stride >= 3 * width). OpenCV stays inside data/image/*.cpp: these types carry
// only pointers and sizes, so no public header of data/ depends on it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace vlm {

// A non-owning view of RGB pixels.
struct ImageView {
  const uint8_t* data = nullptr;
  int height = 0, width = 0;
  size_t stride = 0;  // bytes from one row to the next

  // Rows packed without padding (stride = 3 * width), e.g. an [H, W, 3] batch slot.
  static ImageView packed(const uint8_t* data, int height, int width) {
    return {data, height, width, size_t(width) * 3};
  }
  const uint8_t* row(int y) const { return data + size_t(y) * stride; }
};

// RGB pixels owned by whatever produced them (the decoder's buffer is kept alive, not
// copied); copies share the pixels. Empty when decoding failed.
struct RgbImage {
  std::shared_ptr<const uint8_t> pixels;
  int height = 0, width = 0;
  size_t stride = 0;

  bool empty() const { return pixels == nullptr; }
  ImageView view() const { return {pixels.get(), height, width, stride}; }
};

}  // namespace vlm

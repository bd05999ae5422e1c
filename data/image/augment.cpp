// Training-time augmentation (data/image/augment.h).
#include "data/image/augment.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/splitmix.h"

namespace vlm {

namespace {
constexpr uint64_t kAugmentStream = 0x6175676d656e7421ull;  // "augment!": apart from other draws of the seed
}  // namespace

Augmentation draw_augmentation(const AugmentOptions& o, uint64_t seed, int64_t epoch, int64_t index) {
  Augmentation a;
  if (!o.any()) return a;
  uint64_t state = splitmix64(splitmix64(seed ^ kAugmentStream) ^ uint64_t(epoch)) ^ uint64_t(index);
  const uint64_t r = splitmix64_next(state);
  a.flip = o.flip && (r & 1) != 0;
  if (o.shift > 0) {
    const uint64_t span = uint64_t(2 * o.shift + 1);
    a.dx = int(splitmix64_next(state) % span) - o.shift;
    a.dy = int(splitmix64_next(state) % span) - o.shift;
  }
  return a;
}

void apply_augmentation(const Augmentation& a, int S, uint8_t background, uint8_t* rgb) {
  if (a.identity()) return;
  const size_t row = size_t(S) * 3;
  if (a.flip)
    for (int y = 0; y < S; ++y) {
      uint8_t* p = rgb + size_t(y) * row;
      for (int l = 0, r = S - 1; l < r; ++l, --r)
        for (int c = 0; c < 3; ++c) std::swap(p[3 * l + c], p[3 * r + c]);
    }
  if (a.dx == 0 && a.dy == 0) return;
  thread_local std::vector<uint8_t> src;
  src.assign(rgb, rgb + row * size_t(S));
  std::memset(rgb, background, row * size_t(S));
  // Destination columns [x0, x1) take source columns [x0 - dx, x1 - dx); rows alike.
  const int x0 = std::max(0, a.dx), x1 = std::min(S, S + a.dx);
  const int y0 = std::max(0, a.dy), y1 = std::min(S, S + a.dy);
  if (x0 >= x1) return;
  for (int y = y0; y < y1; ++y)
    std::memcpy(rgb + size_t(y) * row + size_t(x0) * 3, src.data() + size_t(y - a.dy) * row + size_t(x0 - a.dx) * 3,
                size_t(x1 - x0) * 3);
}

void augment_box(const Augmentation& a, int S, float box[4]) {
  const float s = float(S);
  if (a.flip) {
    const float x0 = s - box[2], x1 = s - box[0];
    box[0] = x0, box[2] = x1;
  }
  box[0] += float(a.dx), box[2] += float(a.dx), box[1] += float(a.dy), box[3] += float(a.dy);
  for (int c = 0; c < 4; ++c) box[c] = std::clamp(box[c], 0.f, s);
}

}  // namespace vlm

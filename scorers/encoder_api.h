// What the scorer stage needs from the vision encoder, which its owner provides (the
// encoder itself lives in vision/; train/ plugs it in): encode one image into its cell
// features and take their gradient back. The stage calls encode only for the images its
// placement makes this rank encode (all of them, or r, r+tp, ... under batch-split).
// GivenFeatures serves features computed beforehand (tests, benchmarks, a frozen
// encoder): encode copies rows of F, encode_backward accumulates into dF.
#pragma once
#include <cstdint>

#include "core/ops.h"
#include "core/tensor.h"

namespace vlm {

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  // F [G*G, d] (overwrite): the features of image `image` of the batch.
  virtual void encode(Stream& s, int64_t image, const Tensor& F) = 0;
  // dF [G*G, d]: the loss gradient of those features (the encoder accumulates its own
  // parameter gradients).
  virtual void encode_backward(Stream& s, int64_t image, const Tensor& dF) = 0;
};

class GivenFeatures final : public ImageEncoder {
 public:
  // F [B, G*G, d]; dF the same shape, accumulated (+=) by encode_backward.
  GivenFeatures(Tensor F, Tensor dF) : F_(std::move(F)), dF_(std::move(dF)) {}
  void encode(Stream& s, int64_t image, const Tensor& F) override { copy(s, F, F_.slice(image, image + 1)); }
  void encode_backward(Stream& s, int64_t image, const Tensor& dF) override {
    accumulate(s, dF_.slice(image, image + 1).view(dF.shape()), dF, 1.f);
  }
  const Tensor& grad() const { return dF_; }

 private:
  Tensor F_, dF_;
};

}  // namespace vlm

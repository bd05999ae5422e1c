// Scratch buffers of the scorers: a tensor kept between calls and reallocated only when
// the shape or dtype asked for changes (the batch size of a step), so a steady run
// allocates nothing per step.
#pragma once
#include "core/backend.h"
#include "core/tensor.h"

namespace vlm {

inline const Tensor& scratch(Tensor& t, DeviceKind dev, Shape s, DType dt) {
  if (!t.defined() || t.shape() != s || t.dtype() != dt || t.device() != dev)
    t = Tensor::empty(backend_for(dev), s, dt);
  return t;
}

}  // namespace vlm

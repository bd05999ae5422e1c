// TpSide (nn/tp_side.h): the fork and join of the side stream on CUDA and on CPU.
#include "nn/tp_side.h"

#include "base/error.h"

namespace vlm {

TpSide::TpSide(Backend& b, Stream& side) : side_(side), ready_(b.create_event()), done_(b.create_event()) {
  VLM_ASSERT(side.device() == b.device(), "TpSide: the side stream is on another device");
}

void TpSide::fork(Stream& main, const std::function<void(Stream&)>& fn) {
  VLM_ASSERT(main.device() == side_.device(), "TpSide: main and side streams on different devices");
  ++forks_;
  if (main.device() == DeviceKind::CUDA) {
    main.record(*ready_);
    side_.wait(*ready_);
    fn(side_);
    side_.record(*done_);
    return;
  }
  side_.launch([this, fn] { fn(side_); });
}

void TpSide::join(Stream& main) {
  if (main.device() == DeviceKind::CUDA) return main.wait(*done_);
  side_.synchronize();  // rethrows what fn threw
}

}  // namespace vlm

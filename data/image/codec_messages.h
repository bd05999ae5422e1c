// The image libraries' messages (libpng, libjpeg) silenced, and libjpeg's warnings
// counted per thread: see codec_messages.cpp for how (OpenCV offers no hook). Every
// program that decodes links it through decode_rgb, its one caller.
#pragma once
#include <cstdint>

namespace vlm {

// The libjpeg warnings (corrupt data) of the decodes this thread has run so far.
int64_t jpeg_warnings_on_this_thread();

}  // namespace vlm

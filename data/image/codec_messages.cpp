// libpng and libjpeg report through stderr (libpng: "libpng error: ...", "libpng
// warning: ..."; libjpeg: "Corrupt JPEG data: ..."), and OpenCV's decoders install no
// handlers of their own that would stop them. The two functions below are the
// libraries' own entry points that OpenCV calls to make a decoder's error handlers;
// defined here, in the program, they take precedence over the libraries' (the dynamic
// linker binds OpenCV's references to the program first), call the real ones (dlsym
// RTLD_NEXT) and replace the reporting with handlers that print nothing:
//  - libpng: an error ends the decode as libpng's default handler does (png_longjmp to
//    OpenCV's setjmp, so imdecode returns an empty image), without the message; a
//    warning (an odd colour profile, say) is dropped;
//  - libjpeg: a message is not printed, and a warning (corrupt entropy data, which
//    libjpeg decodes into wrong pixels and OpenCV returns) is counted for the thread, so
//    that decode_rgb refuses the image (data/image/image_pipeline.h).
// So no command writes anything to stderr but its one error line (docs/errors.md).
#include "data/image/codec_messages.h"

#include <dlfcn.h>
#include <png.h>

#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>

#include "base/error.h"

namespace {

template <class Fn>
Fn real(const char* name) {
  Fn f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  VLM_ASSERT(f != nullptr, "codec_messages: ", name, " not found after this program (", dlerror(), ")");
  return f;
}

[[noreturn]] void png_quiet_error(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void png_quiet_warning(png_structp, png_const_charp) {}

thread_local int64_t jpeg_warnings = 0;

void jpeg_quiet_output(j_common_ptr) {}
void jpeg_counting_emit(j_common_ptr, int level) {
  if (level < 0) ++jpeg_warnings;  // level >= 0: trace messages
}

}  // namespace

extern "C" {

png_structp png_create_read_struct(png_const_charp version, png_voidp error_ptr, png_error_ptr error_fn,
                                   png_error_ptr warn_fn) {
  using Fn = png_structp (*)(png_const_charp, png_voidp, png_error_ptr, png_error_ptr);
  static const Fn create = real<Fn>("png_create_read_struct");
  return create(version, error_ptr, error_fn ? error_fn : png_quiet_error, warn_fn ? warn_fn : png_quiet_warning);
}

struct jpeg_error_mgr* jpeg_std_error(struct jpeg_error_mgr* err) {
  using Fn = struct jpeg_error_mgr* (*)(struct jpeg_error_mgr*);
  static const Fn make = real<Fn>("jpeg_std_error");
  make(err);
  err->output_message = jpeg_quiet_output;  // also what the caller's error_exit may print
  err->emit_message = jpeg_counting_emit;
  return err;
}

}  // extern "C"

namespace vlm {

int64_t jpeg_warnings_on_this_thread() { return jpeg_warnings; }

}  // namespace vlm

// HDF5 internals of io/, included by its .cpp files only (it brings <hdf5.h>; the
// rest of the project sees h5_io.h).
// H5_CHECK(expr): expr returns herr_t or hid_t; a negative value is an internal error
// (the HDF5 library failed where the caller had already validated the input), reported
// through vlm_check_failed with the expression text and file:line, like CUDA_CHECK.
// User-facing failures (missing file/dataset, wrong dtype) are detected before the
// call and raised as UserError by the helpers instead; so are reads that fail on the
// data (corrupt chunk, missing filter) and writes that fail on the disk (h5_io.h).
#pragma once
#include <hdf5.h>

#include <type_traits>

#include "base/error.h"
#include "io/h5_io.h"

#define H5_CHECK(expr)                                                                   \
  ([&]() {                                                                               \
    auto h5_check_r = (expr);                                                            \
    if (h5_check_r < 0)                                                                  \
      ::vlm::vlm_check_failed("HDF5", #expr, ::vlm::cat("returned ", (long long)h5_check_r), \
                              __FILE__, __LINE__);                                       \
    return h5_check_r;                                                                   \
  }())

namespace vlm {

static_assert(std::is_same_v<hid_t, H5Handle>, "H5Handle must be HDF5's hid_t (HDF5 >= 1.10)");

hid_t h5_native(H5Elem e);     // memory type (H5T_NATIVE_*)
hid_t h5_file_type(H5Elem e);  // stored type (little-endian)
// Turns off HDF5's own error stack printing (our messages replace it); idempotent.
void h5_silence_errors();

}  // namespace vlm

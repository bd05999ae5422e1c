// H5_CHECK and RAII ownership of HDF5 identifiers (hid_t).
// H5_CHECK(expr): expr returns herr_t or hid_t; a negative value is an internal error
// (the HDF5 library failed where the caller had already validated the input), reported
// through vlm_check_failed with the expression text and file:line, like CUDA_CHECK.
// User-facing failures (missing file/dataset, wrong dtype) are detected before the
// call and raised as UserError by the readers instead.
// H5Id owns one identifier and closes it with the matching H5?close on destruction;
// it is move-only, so an identifier is closed exactly once.
#pragma once
#include <hdf5.h>

#include <mutex>
#include <utility>

#include "core/error.h"

#define H5_CHECK(expr)                                                                   \
  ([&]() {                                                                               \
    auto h5_check_r = (expr);                                                            \
    if (h5_check_r < 0)                                                                  \
      ::vlm::vlm_check_failed("HDF5", #expr, ::vlm::cat("returned ", (long long)h5_check_r), \
                              __FILE__, __LINE__);                                       \
    return h5_check_r;                                                                   \
  }())

namespace vlm {

// The one lock of every HDF5 call (the Debian HDF5 build is not thread-safe); recursive,
// so a caller that already holds it can close identifiers. Defined in h5_io.cpp.
std::recursive_mutex& h5_mutex();
using H5Lock = std::lock_guard<std::recursive_mutex>;

class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { reset(); }

  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

  // Closes with the function that matches the identifier's type.
  void reset() {
    if (id_ < 0) return;
    H5Lock lock(h5_mutex());  // closing is an HDF5 call too, whatever the caller holds
    switch (H5Iget_type(id_)) {
      case H5I_FILE: H5Fclose(id_); break;
      case H5I_GROUP: H5Gclose(id_); break;
      case H5I_DATASET: H5Dclose(id_); break;
      case H5I_DATASPACE: H5Sclose(id_); break;
      case H5I_DATATYPE: H5Tclose(id_); break;
      case H5I_ATTR: H5Aclose(id_); break;
      case H5I_GENPROP_LST: H5Pclose(id_); break;
      default: break;
    }
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

}  // namespace vlm

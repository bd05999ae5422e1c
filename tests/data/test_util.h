// Helpers shared by the data tests (scratch folders and files: tests/support/files.h): the Debian dataset locations,
// an independent gzip/IDX reader (so converter output is checked against bytes read by
// other code than the converter's), and small HDF5 C API readers.
#pragma once
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/convert/converters.h"
#include "data/storage/dataset.h"
#include "tests/support/files.h"

namespace vlm::test {

inline const char* kFashionDir = "/usr/share/datasets/fashion-mnist";
inline const char* kTuxDir = "/usr/share/tuxpaint/stamps";

// The build options of the converter tests: `limit` images from `seed` into `out`, 10%
// validation, 20% test, no progress line.
inline BuildOptions small_build(const std::string& out, int64_t limit, uint64_t seed) {
  BuildOptions o;
  o.out = out, o.limit = limit, o.seed = seed;
  o.val_fraction = 0.1, o.test_fraction = 0.2;
  o.progress = false;
  return o;
}

// The splits of a file built with small_build's fractions: disjoint, covering every
// image, floor(n x 0.1) val and floor(n x 0.2) test images.
void expect_small_build_splits(const DatasetReader& r);

bool have_fashion_mnist();
bool have_tuxpaint();
// Whole decompressed content of a .gz file (zlib, independent of data/convert/idx.cpp).
std::string gunzip(const std::string& path);

// HDF5 C API readers for field-by-field checks.
std::vector<int64_t> h5_dims(hid_t f, const char* ds);
std::vector<uint8_t> h5_u8(hid_t f, const char* ds);
std::vector<int64_t> h5_i64(hid_t f, const char* ds);
std::vector<int32_t> h5_i32(hid_t f, const char* ds);
std::string h5_str_attr(hid_t obj, const char* name);
int64_t h5_int_attr(hid_t obj, const char* name);

// Runs `f(file)` on the HDF5 file `path` opened read-write (to make malformed files).
template <typename F>
void h5_edit(const std::string& path, F&& f) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  f(file);
  H5Fclose(file);
}

}  // namespace vlm::test

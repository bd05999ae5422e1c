// Implementation of the data-test helpers (see test_util.h).
#include "test_util.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vlm::test {

namespace fs = std::filesystem;

void expect_small_build_splits(const DatasetReader& r) {
  const int64_t n = r.num_images();
  std::vector<int> seen(size_t(n), 0);
  for (const char* s : {"train", "val", "test"})
    for (int64_t i : r.split(s)) ++seen[size_t(i)];
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "image " << i;
  EXPECT_EQ(int64_t(r.split("val").size()), n / 10);
  EXPECT_EQ(int64_t(r.split("test").size()), n / 5);
}

bool have_fashion_mnist() { return fs::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz"); }
bool have_tuxpaint() { return fs::is_directory(kTuxDir); }

std::string gunzip(const std::string& path) {
  gzFile g = gzopen(path.c_str(), "rb");
  if (!g) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(g, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  gzclose(g);
  return out;
}

std::vector<int64_t> h5_dims(hid_t f, const char* ds) {
  hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
  if (d < 0) throw std::runtime_error(std::string("no dataset ") + ds);
  hid_t s = H5Dget_space(d);
  const int nd = H5Sget_simple_extent_ndims(s);
  std::vector<hsize_t> h(static_cast<size_t>(nd));
  H5Sget_simple_extent_dims(s, h.data(), nullptr);
  H5Sclose(s);
  H5Dclose(d);
  return {h.begin(), h.end()};
}

template <typename T>
static std::vector<T> read_all(hid_t f, const char* ds, hid_t mem) {
  int64_t n = 1;
  for (int64_t v : h5_dims(f, ds)) n *= v;
  std::vector<T> out(static_cast<size_t>(n));
  hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
  if (n > 0) H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Dclose(d);
  return out;
}

std::vector<uint8_t> h5_u8(hid_t f, const char* ds) { return read_all<uint8_t>(f, ds, H5T_NATIVE_UINT8); }
std::vector<int64_t> h5_i64(hid_t f, const char* ds) { return read_all<int64_t>(f, ds, H5T_NATIVE_INT64); }
std::vector<int32_t> h5_i32(hid_t f, const char* ds) { return read_all<int32_t>(f, ds, H5T_NATIVE_INT32); }

std::string h5_str_attr(hid_t obj, const char* name) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t ft = H5Aget_type(a);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5Tget_cset(ft));  // UTF-8 strings need a UTF-8 memory type
  H5Tclose(ft);
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  return s;
}

int64_t h5_int_attr(hid_t obj, const char* name) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  int64_t v = -1;
  H5Aread(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  return v;
}

}  // namespace vlm::test

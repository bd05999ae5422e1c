// Implementation of the checked HDF5 helpers (see h5_io.h for the invariants).
#include "data/h5_io.h"

#include <algorithm>
#include <cstring>

namespace vlm {

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

// HDF5 prints its own error stack to stderr by default; our messages replace it.
static void silence_h5_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

hid_t h5_native(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return H5T_NATIVE_UINT8;
    case H5Elem::I32: return H5T_NATIVE_INT32;
    case H5Elem::I64: return H5T_NATIVE_INT64;
  }
  return H5T_NATIVE_UINT8;
}

const char* h5_elem_name(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return "uint8";
    case H5Elem::I32: return "int32";
    case H5Elem::I64: return "int64";
  }
  return "?";
}

static size_t elem_size(H5Elem e) { return e == H5Elem::U8 ? 1 : e == H5Elem::I32 ? 4 : 8; }

H5Id h5_create_file(const std::string& path) {
  H5Lock lock(h5_mutex());
  silence_h5_errors();
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot create HDF5 file (directory missing or not writable?)");
  return H5Id(f);
}

H5Id h5_create_group(hid_t parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Id(H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

void h5_write_attr_string(hid_t obj, const std::string& name, const std::string& value) {
  H5Lock lock(h5_mutex());
  // Variable-length UTF-8 string: h5py reads it back as a Python str.
  H5Id type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  H5Id space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Id attr(H5_CHECK(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  const char* p = value.c_str();
  H5_CHECK(H5Awrite(attr, type, &p));
}

void h5_write_attr_int(hid_t obj, const std::string& name, int64_t value) {
  H5Lock lock(h5_mutex());
  H5Id space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Id attr(H5_CHECK(
      H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value));
}

static hid_t file_type(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return H5T_STD_U8LE;
    case H5Elem::I32: return H5T_STD_I32LE;
    case H5Elem::I64: return H5T_STD_I64LE;
  }
  return H5T_STD_U8LE;
}

void h5_write_1d(hid_t parent, const std::string& name, H5Elem e, const void* data, int64_t n,
                 bool gzip) {
  // Chunks of at most 1 MiB; gzip only pays above a few KiB.
  const int64_t chunk = std::clamp<int64_t>(n, 1, int64_t(1 << 20) / int64_t(elem_size(e)));
  H5Appender a(parent, name, e, {}, chunk, gzip && n >= 4096 ? 4 : 0);
  if (n > 0) a.append(data, n);
}

H5Appender::H5Appender(hid_t parent, const std::string& name, H5Elem e, std::vector<int64_t> inner,
                       int64_t chunk_rows, int gzip_level)
    : elem_(e), inner_(std::move(inner)) {
  H5Lock lock(h5_mutex());
  const int nd = 1 + int(inner_.size());
  std::vector<hsize_t> cur(nd, 0), mx(nd), chunk(nd);
  mx[0] = H5S_UNLIMITED;
  chunk[0] = hsize_t(std::max<int64_t>(chunk_rows, 1));
  for (int i = 1; i < nd; ++i) cur[i] = mx[i] = chunk[i] = hsize_t(inner_[i - 1]);
  H5Id space(H5_CHECK(H5Screate_simple(nd, cur.data(), mx.data())));
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_chunk(dcpl, nd, chunk.data()));
  if (gzip_level > 0) {
    H5_CHECK(H5Pset_shuffle(dcpl));
    H5_CHECK(H5Pset_deflate(dcpl, unsigned(gzip_level)));
  }
  ds_ = H5Id(H5_CHECK(H5Dcreate2(parent, name.c_str(), file_type(e), space, H5P_DEFAULT, dcpl,
                                 H5P_DEFAULT)));
}

void H5Appender::append(const void* rows_data, int64_t rows) {
  if (rows <= 0) return;
  H5Lock lock(h5_mutex());
  const int nd = 1 + int(inner_.size());
  std::vector<hsize_t> size(nd), start(nd, 0), count(nd);
  size[0] = hsize_t(rows_ + rows);
  start[0] = hsize_t(rows_);
  count[0] = hsize_t(rows);
  for (int i = 1; i < nd; ++i) size[i] = count[i] = hsize_t(inner_[i - 1]);
  H5_CHECK(H5Dset_extent(ds_, size.data()));
  H5Id fspace(H5_CHECK(H5Dget_space(ds_)));
  H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  H5Id mspace(H5_CHECK(H5Screate_simple(nd, count.data(), nullptr)));
  H5_CHECK(H5Dwrite(ds_, h5_native(elem_), mspace, fspace, H5P_DEFAULT, rows_data));
  rows_ += rows;
}

H5Id h5_open_file(const std::string& path) {
  H5Lock lock(h5_mutex());
  silence_h5_errors();
  VLM_REQUIRE(H5Fis_hdf5(path.c_str()) > 0, path, ": cannot open as an HDF5 file (missing or not HDF5)");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot open as an HDF5 file");
  return H5Id(f);
}

bool h5_exists(hid_t file, const std::string& path) {
  H5Lock lock(h5_mutex());
  // H5Lexists needs every intermediate group to exist, so walk the components.
  size_t pos = 1;
  while (true) {
    size_t next = path.find('/', pos);
    std::string prefix = path.substr(0, next);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) return true;
    pos = next + 1;
  }
}

H5Id h5_open_dataset(hid_t file, const std::string& file_name, const std::string& path, H5Elem e,
                     int ndim, std::vector<int64_t>* dims) {
  H5Lock lock(h5_mutex());
  VLM_REQUIRE(h5_exists(file, path), file_name, ": dataset ", path, " is missing");
  // A 32 MiB chunk cache per dataset: random access to images re-reads (and, with gzip,
  // re-inflates) whole chunks when they do not stay cached. Memory is used only on reads.
  H5Id dapl(H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS)));
  H5_CHECK(H5Pset_chunk_cache(dapl, 4099, size_t(32) << 20, 1.0));
  hid_t d = H5Dopen2(file, path.c_str(), dapl);
  VLM_REQUIRE(d >= 0, file_name, ": ", path, " is not a dataset");
  H5Id ds(d);
  H5Id type(H5_CHECK(H5Dget_type(ds)));
  const bool ok_class = H5Tget_class(type) == H5T_INTEGER;
  const size_t sz = H5Tget_size(type);
  // 64-bit indices may be signed or unsigned (h5py users write either); u8/i32 are exact.
  const bool ok_sign = e == H5Elem::I64 || (H5Tget_sign(type) == H5T_SGN_NONE) == (e == H5Elem::U8);
  VLM_REQUIRE(ok_class && sz == elem_size(e) && ok_sign, file_name, ": dataset ", path,
              " has the wrong dtype (expected ", h5_elem_name(e), ")");
  H5Id space(H5_CHECK(H5Dget_space(ds)));
  const int nd = H5Sget_simple_extent_ndims(space);
  VLM_REQUIRE(nd == ndim, file_name, ": dataset ", path, " has ", nd, " dimensions (expected ",
              ndim, ")");
  std::vector<hsize_t> hd(size_t(std::max(nd, 1)));
  H5_CHECK(H5Sget_simple_extent_dims(space, hd.data(), nullptr));
  if (dims) {
    dims->assign(size_t(nd), 0);
    for (int i = 0; i < nd; ++i) {
      VLM_REQUIRE(hd[size_t(i)] < (hsize_t(1) << 50), file_name, ": dataset ", path,
                  " has an implausible size");
      (*dims)[size_t(i)] = int64_t(hd[size_t(i)]);
    }
  }
  return ds;
}

void h5_read_rows(hid_t ds, H5Elem e, int64_t start, int64_t count, int64_t row_elems, void* out) {
  if (count <= 0) return;
  H5Lock lock(h5_mutex());
  H5Id fspace(H5_CHECK(H5Dget_space(ds)));
  const int nd = H5Sget_simple_extent_ndims(fspace);
  std::vector<hsize_t> dims(static_cast<size_t>(nd)), st(size_t(nd), 0), cnt(static_cast<size_t>(nd));
  H5_CHECK(H5Sget_simple_extent_dims(fspace, dims.data(), nullptr));
  VLM_ASSERT(start >= 0 && hsize_t(start + count) <= dims[0], "row range out of bounds");
  st[0] = hsize_t(start);
  cnt[0] = hsize_t(count);
  int64_t inner = 1;
  for (int i = 1; i < nd; ++i) {
    cnt[size_t(i)] = dims[size_t(i)];
    inner *= int64_t(dims[size_t(i)]);
  }
  VLM_ASSERT(inner == row_elems, "row size mismatch");
  H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, st.data(), nullptr, cnt.data(), nullptr));
  H5Id mspace(H5_CHECK(H5Screate_simple(nd, cnt.data(), nullptr)));
  H5_CHECK(H5Dread(ds, h5_native(e), mspace, fspace, H5P_DEFAULT, out));
}

std::vector<int64_t> h5_read_i64(hid_t file, const std::string& file_name, const std::string& path,
                                 int64_t max_n) {
  H5Lock lock(h5_mutex());
  std::vector<int64_t> dims;
  H5Id ds = h5_open_dataset(file, file_name, path, H5Elem::I64, 1, &dims);
  VLM_REQUIRE(dims[0] <= max_n, file_name, ": dataset ", path, " has ", dims[0],
              " entries (at most ", max_n, " allowed)");
  std::vector<int64_t> v(static_cast<size_t>(dims[0]));
  h5_read_rows(ds, H5Elem::I64, 0, dims[0], 1, v.data());
  return v;
}

bool h5_has_attr(hid_t obj, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Aexists(obj, name.c_str()) > 0;
}

std::string h5_read_attr_string(hid_t obj, const std::string& file_name, const std::string& name) {
  H5Lock lock(h5_mutex());
  VLM_REQUIRE(h5_has_attr(obj, name), file_name, ": root attribute '", name, "' is missing");
  H5Id attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  VLM_REQUIRE(H5Tget_class(type) == H5T_STRING, file_name, ": attribute '", name,
              "' is not a string");
  if (H5Tis_variable_str(type) > 0) {
    H5Id mt(H5_CHECK(H5Tcopy(H5T_C_S1)));
    H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(mt, H5Tget_cset(type)));
    char* p = nullptr;
    H5_CHECK(H5Aread(attr, mt, &p));
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(type);
  VLM_REQUIRE(n < (1u << 20), file_name, ": attribute '", name, "' is implausibly long");
  std::string s(n, '\0');
  H5Id mt(H5_CHECK(H5Tcopy(type)));
  H5_CHECK(H5Aread(attr, mt, s.data()));
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t h5_read_attr_int(hid_t obj, const std::string& file_name, const std::string& name) {
  H5Lock lock(h5_mutex());
  VLM_REQUIRE(h5_has_attr(obj, name), file_name, ": root attribute '", name, "' is missing");
  H5Id attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  VLM_REQUIRE(H5Tget_class(type) == H5T_INTEGER, file_name, ": attribute '", name,
              "' is not an integer");
  int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v));
  return v;
}

}  // namespace vlm

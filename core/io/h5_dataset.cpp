// HDF5 datasets: whole-dataset and streaming (H5Appender) writers, the checked open and
// the row reads (invariants in h5_io.h).
#include <algorithm>

#include "core/io/h5_check.h"
#include "core/io/h5_io.h"

namespace vlm {

// ---- writing ----

void h5_write_1d(H5Handle parent, const std::string& name, H5Elem e, const void* data, int64_t n,
                 bool gzip) {
  // Chunks of at most 1 MiB; gzip only pays above a few KiB.
  const int64_t chunk = std::clamp<int64_t>(n, 1, int64_t(1 << 20) / int64_t(h5_elem_size(e)));
  H5Appender a(parent, name, e, {}, chunk, gzip && n >= 4096 ? 4 : 0);
  if (n > 0) a.append(data, n);
}

void h5_write_array(H5Handle parent, const std::string& name, H5Elem e, const void* data,
                    const std::vector<int64_t>& dims) {
  H5Lock lock(h5_mutex());
  std::vector<hsize_t> hd(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    VLM_ASSERT(dims[i] >= 0, "negative dimension of dataset ", name);
    hd[i] = hsize_t(dims[i]);
  }
  H5Id space(H5_CHECK(H5Screate_simple(int(hd.size()), hd.data(), nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(parent, name.c_str(), h5_file_type(e), space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(ds, h5_native(e), H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

H5Appender::H5Appender(H5Handle parent, const std::string& name, H5Elem e, std::vector<int64_t> inner,
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
  ds_ = H5Id(H5_CHECK(H5Dcreate2(parent, name.c_str(), h5_file_type(e), space, H5P_DEFAULT, dcpl,
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

// ---- reading ----

H5Id h5_open_dataset(H5Handle file, const std::string& file_name, const std::string& path, H5Elem e,
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
  const H5T_class_t cls = H5Tget_class(type);
  const size_t sz = H5Tget_size(type);
  bool ok = false;
  if (e == H5Elem::F32) {
    ok = cls == H5T_FLOAT && sz == 4;
  } else {
    // 64-bit indices may be signed or unsigned (h5py users write either); u8/i32 are exact.
    const bool ok_sign = e == H5Elem::I64 || (H5Tget_sign(type) == H5T_SGN_NONE) == (e == H5Elem::U8);
    ok = cls == H5T_INTEGER && sz == h5_elem_size(e) && ok_sign;
  }
  VLM_REQUIRE(ok, file_name, ": dataset ", path, " has the wrong dtype (expected ", h5_elem_name(e), ")");
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

std::vector<int64_t> h5_extent(H5Handle ds) {
  H5Lock lock(h5_mutex());
  H5Id space(H5_CHECK(H5Dget_space(ds)));
  const int nd = H5_CHECK(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> hd(size_t(std::max(nd, 1)));
  H5_CHECK(H5Sget_simple_extent_dims(space, hd.data(), nullptr));
  return std::vector<int64_t>(hd.begin(), hd.begin() + nd);
}

void h5_read_rows(H5Handle ds, H5Elem e, int64_t start, int64_t count, int64_t row_elems, void* out) {
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

std::vector<int64_t> h5_read_i64(H5Handle file, const std::string& file_name, const std::string& path,
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

}  // namespace vlm

// HDF5 datasets: whole-dataset and streaming (H5Appender) writers, the checked open,
// the row reads and the whole-dataset reads (invariants in h5_io.h).
#include <algorithm>

#include "base/memory_check.h"
#include "io/h5_check.h"
#include "io/h5_io.h"

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
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(dcpl, false));
  H5Id ds(h5_require_created(H5Dcreate2(parent, name.c_str(), h5_file_type(e), space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                             parent));
  h5_require_written(H5Dwrite(ds, h5_native(e), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), ds);
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
  H5_CHECK(H5Pset_obj_track_times(dcpl, false));
  if (gzip_level > 0) {
    H5_CHECK(H5Pset_shuffle(dcpl));
    H5_CHECK(H5Pset_deflate(dcpl, unsigned(gzip_level)));
  }
  ds_ = H5Id(h5_require_created(
      H5Dcreate2(parent, name.c_str(), h5_file_type(e), space, H5P_DEFAULT, dcpl, H5P_DEFAULT), parent));
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
  h5_require_written(H5Dset_extent(ds_, size.data()), ds_);
  H5Id fspace(H5_CHECK(H5Dget_space(ds_)));
  H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  H5Id mspace(H5_CHECK(H5Screate_simple(nd, count.data(), nullptr)));
  h5_require_written(H5Dwrite(ds_, h5_native(elem_), mspace, fspace, H5P_DEFAULT, rows_data), ds_);
  rows_ += rows;
}

// ---- reading ----

namespace {

// Every component of `path` ("/a/b") must be a hard link: soft links may dangle or loop,
// external links would open other files.
void require_hard_links(H5Handle file, const std::string& file_name, const std::string& path) {
  for (size_t pos = 1;;) {
    const size_t next = path.find('/', pos);
    const std::string prefix = path.substr(0, next);
    H5L_info_t info{};
    VLM_REQUIRE(H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) >= 0, file_name, ": ", prefix,
                " cannot be read (corrupt file?)");
    VLM_REQUIRE(info.type == H5L_TYPE_HARD, file_name, ": ", prefix, " is a ",
                info.type == H5L_TYPE_SOFT ? "soft" : info.type == H5L_TYPE_EXTERNAL ? "external" : "user-defined",
                " link (the reader follows hard links only)");
    if (next == std::string::npos) return;
    pos = next + 1;
  }
}

// Layout, external storage and filters of an open dataset (see h5_open_dataset).
void require_plain_storage(H5Handle ds, const std::string& file_name, const std::string& path) {
  H5Id dcpl(H5Dget_create_plist(ds));
  VLM_REQUIRE(dcpl.valid(), file_name, ": dataset ", path, " has unreadable properties (corrupt file?)");
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  VLM_REQUIRE(layout == H5D_CONTIGUOUS || layout == H5D_CHUNKED || layout == H5D_COMPACT, file_name,
              ": dataset ", path, " has a virtual or unknown layout (expected contiguous, chunked or compact)");
  VLM_REQUIRE(H5Pget_external_count(dcpl) == 0, file_name, ": dataset ", path,
              " keeps its data in external files (not allowed)");
  const int nf = H5Pget_nfilters(dcpl);
  VLM_REQUIRE(nf >= 0, file_name, ": dataset ", path, " has unreadable filters (corrupt file?)");
  for (int k = 0; k < nf; ++k) {
    unsigned flags = 0, config = 0;
    size_t n_cd = 0;
    char name[64] = {0};
    const H5Z_filter_t id = H5Pget_filter2(dcpl, unsigned(k), &flags, &n_cd, nullptr, sizeof name, name, &config);
    VLM_REQUIRE(id >= 0, file_name, ": dataset ", path, " has an unreadable filter (corrupt file?)");
    VLM_REQUIRE(H5Zfilter_avail(id) > 0, file_name, ": dataset ", path, " needs the HDF5 filter '",
                name[0] ? name : "?", "' (id ", int(id), "), which this HDF5 library does not have");
  }
}

std::string dataset_name(H5Handle ds) {
  char buf[512] = {0};
  const ssize_t n = H5Fget_name(ds, buf, sizeof buf);
  return cat(n > 0 ? std::string(buf) : std::string("?"), ": dataset ", h5_object_name(ds));
}

}  // namespace

H5Id h5_open_dataset(H5Handle file, const std::string& file_name, const std::string& path, H5Elem e,
                     int ndim, std::vector<int64_t>* dims) {
  H5Lock lock(h5_mutex());
  VLM_REQUIRE(h5_exists(file, path), file_name, ": dataset ", path, " is missing");
  require_hard_links(file, file_name, path);
  // A 32 MiB chunk cache per dataset: random access to images re-reads (and, with gzip,
  // re-inflates) whole chunks when they do not stay cached. Memory is used only on reads.
  H5Id dapl(H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS)));
  H5_CHECK(H5Pset_chunk_cache(dapl, 4099, size_t(32) << 20, 1.0));
  hid_t d = H5Dopen2(file, path.c_str(), dapl);
  VLM_REQUIRE(d >= 0, file_name, ": ", path, " is not a dataset");
  H5Id ds(d);
  H5Id type(H5Dget_type(ds));
  VLM_REQUIRE(type.valid(), file_name, ": dataset ", path, " has an unreadable type (corrupt file?)");
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
  H5Id space(H5Dget_space(ds));
  VLM_REQUIRE(space.valid(), file_name, ": dataset ", path, " has an unreadable shape (corrupt file?)");
  const int nd = H5Sget_simple_extent_ndims(space);
  VLM_REQUIRE(nd == ndim, file_name, ": dataset ", path, " has ", nd, " dimensions (expected ",
              ndim, ")");
  std::vector<hsize_t> hd(size_t(std::max(nd, 1)));
  VLM_REQUIRE(H5Sget_simple_extent_dims(space, hd.data(), nullptr) >= 0, file_name, ": dataset ", path,
              " has an unreadable shape (corrupt file?)");
  uint64_t bytes = h5_elem_size(e);
  for (int i = 0; i < nd; ++i) {
    VLM_REQUIRE(hd[size_t(i)] < (hsize_t(1) << 50), file_name, ": dataset ", path, " has an implausible size");
    bytes = mul_sat(bytes, hd[size_t(i)]);
  }
  VLM_REQUIRE(bytes < (uint64_t(1) << 62), file_name, ": dataset ", path, " has an implausible size");
  require_plain_storage(ds, file_name, path);
  if (dims) {
    dims->assign(size_t(nd), 0);
    for (int i = 0; i < nd; ++i) (*dims)[size_t(i)] = int64_t(hd[size_t(i)]);
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
  // The data is the user's: a corrupt chunk or a filter that fails is their problem.
  VLM_REQUIRE(H5Dread(ds, h5_native(e), mspace, fspace, H5P_DEFAULT, out) >= 0, dataset_name(ds), ": reading ",
              count, " rows from row ", start, " failed (corrupt data or a failing compression filter)");
}

void h5_check_whole_read(H5Handle ds, const std::string& file_name, const std::string& path, uint64_t bytes) {
  if (bytes == 0) return;
  H5Lock lock(h5_mutex());
  H5Id dcpl(H5_CHECK(H5Dget_create_plist(ds)));
  const bool filtered = H5Pget_nfilters(dcpl) > 0;
  const uint64_t stored = H5Dget_storage_size(ds);
  VLM_REQUIRE(filtered ? bytes / kH5MaxFilterRatio <= stored : bytes <= stored, file_name, ": dataset ", path,
              " declares ", bytes, " bytes but the file stores ", stored,
              filtered ? " compressed" : "", " (truncated, never written or a compression bomb)");
  require_allocatable(bytes, cat(file_name, ": dataset ", path));
}

namespace {
template <typename T>
std::vector<T> read_whole_1d(H5Handle file, const std::string& file_name, const std::string& path, H5Elem e,
                             int64_t max_n, int64_t expect) {
  H5Lock lock(h5_mutex());
  std::vector<int64_t> dims;
  H5Id ds = h5_open_dataset(file, file_name, path, e, 1, &dims);
  if (expect >= 0)
    VLM_REQUIRE(dims[0] == expect, file_name, ": dataset ", path, " has ", dims[0], " entries (expected ", expect,
                ")");
  else
    VLM_REQUIRE(dims[0] <= max_n, file_name, ": dataset ", path, " has ", dims[0], " entries (at most ", max_n,
                " allowed)");
  h5_check_whole_read(ds, file_name, path, uint64_t(dims[0]) * sizeof(T));
  std::vector<T> v(static_cast<size_t>(dims[0]));
  h5_read_rows(ds, e, 0, dims[0], 1, v.data());
  return v;
}
}  // namespace

std::vector<int64_t> h5_read_i64(H5Handle file, const std::string& file_name, const std::string& path,
                                 int64_t max_n, int64_t expect) {
  return read_whole_1d<int64_t>(file, file_name, path, H5Elem::I64, max_n, expect);
}

std::vector<int32_t> h5_read_i32(H5Handle file, const std::string& file_name, const std::string& path,
                                 int64_t max_n, int64_t expect) {
  return read_whole_1d<int32_t>(file, file_name, path, H5Elem::I32, max_n, expect);
}

}  // namespace vlm

// HDF5 identifiers, element types, files, groups, links and attributes (h5_io.h has the
// invariants; datasets are in h5_dataset.cpp).
#include "core/io/h5_io.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/io/h5_check.h"

namespace vlm {

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

void h5_silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

void H5Id::reset() {
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
  id_ = kH5Invalid;
}

hid_t h5_native(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return H5T_NATIVE_UINT8;
    case H5Elem::I32: return H5T_NATIVE_INT32;
    case H5Elem::I64: return H5T_NATIVE_INT64;
    case H5Elem::F32: return H5T_NATIVE_FLOAT;
  }
  return H5T_NATIVE_UINT8;
}

hid_t h5_file_type(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return H5T_STD_U8LE;
    case H5Elem::I32: return H5T_STD_I32LE;
    case H5Elem::I64: return H5T_STD_I64LE;
    case H5Elem::F32: return H5T_IEEE_F32LE;
  }
  return H5T_STD_U8LE;
}

const char* h5_elem_name(H5Elem e) {
  switch (e) {
    case H5Elem::U8: return "uint8";
    case H5Elem::I32: return "int32";
    case H5Elem::I64: return "int64";
    case H5Elem::F32: return "float32";
  }
  return "?";
}

size_t h5_elem_size(H5Elem e) { return e == H5Elem::U8 ? 1 : e == H5Elem::I64 ? 8 : 4; }

// ---- files, groups, links ----

H5Id h5_create_file(const std::string& path) {
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot create HDF5 file (directory missing or not writable?)");
  return H5Id(f);
}

void h5_write_file_atomic(const std::string& path, const std::function<void(H5Handle file)>& write) {
  const std::string tmp = cat(path, ".tmp.", getpid());
  try {
    {
      H5Id f = h5_create_file(tmp);
      write(f.get());
    }  // closed (flushed) before the rename
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    VLM_REQUIRE(!ec, path, ": cannot rename the written ", tmp, " to it (", ec.message(), ")");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
}

H5Id h5_open_file(const std::string& path) {
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  VLM_REQUIRE(H5Fis_hdf5(path.c_str()) > 0, path, ": cannot open as an HDF5 file (missing or not HDF5)");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot open as an HDF5 file");
  return H5Id(f);
}

H5Id h5_open_file_rw(const std::string& path) {
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot open for writing");
  return H5Id(f);
}

void h5_flush(H5Handle file) {
  H5Lock lock(h5_mutex());
  H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
}

H5Id h5_create_group(H5Handle parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Id(H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

H5Id h5_open_group(H5Handle parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Id(H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)));
}

bool h5_exists(H5Handle file, const std::string& path) {
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

void h5_unlink(H5Handle parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0) H5_CHECK(H5Ldelete(parent, name.c_str(), H5P_DEFAULT));
}

// ---- attributes ----

void h5_write_attr_string(H5Handle obj, const std::string& name, const std::string& value) {
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

void h5_write_attr_int(H5Handle obj, const std::string& name, int64_t value) {
  H5Lock lock(h5_mutex());
  H5Id space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Id attr(H5_CHECK(
      H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value));
}

bool h5_has_attr(H5Handle obj, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Aexists(obj, name.c_str()) > 0;
}

void h5_delete_attr(H5Handle obj, const std::string& name) {
  H5Lock lock(h5_mutex());
  if (h5_has_attr(obj, name)) H5_CHECK(H5Adelete(obj, name.c_str()));
}

std::string h5_read_attr_string(H5Handle obj, const std::string& file_name, const std::string& name) {
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

int64_t h5_read_attr_int(H5Handle obj, const std::string& file_name, const std::string& name) {
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

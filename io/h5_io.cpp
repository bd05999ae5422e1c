// HDF5 identifiers, element types, files, groups, links and attributes (h5_io.h has the
// invariants; datasets are in h5_dataset.cpp).
#include "io/h5_io.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/file_read.h"
#include "io/atomic_file.h"
#include "io/h5_check.h"

namespace vlm {

void h5_silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // No library shutdown at exit: HDF5 1.10 crashes there on a file whose close failed
    // (a write error). Writers close their files themselves (h5_close_file), so nothing
    // is lost. Effective only before the library initialises, hence first.
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  // HDF5 keeps an error stack per thread (and prints it unless told not to): each thread
  // that calls HDF5 (the loader's workers too) silences its own before its first call.
  thread_local bool silenced = false;
  if (!silenced) {
    silenced = true;
    std::lock_guard<std::recursive_mutex> lock(m);
    h5_silence_errors();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  return m;
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

namespace {

// Why the HDF5 call that just failed failed, read from its error stack before another
// HDF5 call clears it: the system error of its innermost failing read or write (the
// file drivers record "errno = N") as strerror words ("No space left on device"), else
// HDF5's innermost description of the failure.
std::string h5_failure_reason() {
  struct Found {
    int err = 0;
    std::string first;
  } found;
  auto visit = [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
    auto* f = static_cast<Found*>(data);
    const std::string d = e && e->desc ? e->desc : "";
    if (f->first.empty() && !d.empty()) f->first = d;
    const size_t at = d.find("errno = ");
    if (f->err == 0 && at != std::string::npos) f->err = std::atoi(d.c_str() + at + 8);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, visit, &found);
  if (found.err > 0) return std::strerror(found.err);
  return found.first.empty() ? "disk full, quota or file size limit?" : found.first;
}

// The final name of the file `obj` belongs to (the AtomicFile's path, not its temporary).
std::string h5_file_of(H5Handle obj) {
  char buf[4096] = {0};
  const ssize_t n = H5Fget_name(obj, buf, sizeof buf);
  return n > 0 ? AtomicFile::final_path_of(buf) : std::string("HDF5 file");
}

}  // namespace

H5Id h5_create_file(const std::string& path) {
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) {
    const std::string why = h5_failure_reason();
    throw UserError(cat(AtomicFile::final_path_of(path), ": cannot create HDF5 file (", why, ")"));
  }
  return H5Id(f);
}

void h5_write_file_atomic(const std::string& path, const std::function<void(H5Handle file)>& write) {
  AtomicFile out(path);
  H5Id f = h5_create_file(out.temp_path());
  write(f.get());
  h5_close_file(f);  // checked: a close that fails leaves an incomplete file
  out.commit();
}

H5Id h5_open_file(const std::string& path) {
  require_regular_if_present(path, "an HDF5 file");
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  VLM_REQUIRE(H5Fis_hdf5(path.c_str()) > 0, path, ": cannot open as an HDF5 file (missing or not HDF5)");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot open as an HDF5 file");
  return H5Id(f);
}

H5Id h5_open_file_rw(const std::string& path) {
  require_regular_if_present(path, "an HDF5 file");
  H5Lock lock(h5_mutex());
  h5_silence_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, path, ": cannot open for writing");
  return H5Id(f);
}

void h5_require_written(long long status, H5Handle obj) {
  if (status >= 0) return;
  const std::string why = h5_failure_reason();  // first: the next HDF5 call clears the stack
  throw UserError(cat(h5_file_of(obj), ": write failed (", why, ")"));
}

H5Handle h5_require_created(H5Handle id, H5Handle parent) {
  h5_require_written(id, parent);
  return id;
}

void h5_flush(H5Handle file) {
  H5Lock lock(h5_mutex());
  h5_require_written(H5Fflush(file, H5F_SCOPE_GLOBAL), file);
}

void h5_close_file(H5Id& file) {
  H5Lock lock(h5_mutex());
  if (!file.valid()) return;
  h5_flush(file);
  const std::string name = h5_file_of(file);
  const H5Handle id = file.release();
  // The library flushes again on close; a failure there means the file is incomplete.
  if (H5Fclose(id) < 0) {
    const std::string why = h5_failure_reason();
    throw UserError(cat(name, ": write failed when closing it (", why, ")"));
  }
}

H5Id h5_create_group(H5Handle parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Id(h5_require_created(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), parent));
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

std::vector<std::string> h5_list(H5Handle group) {
  H5Lock lock(h5_mutex());
  std::vector<std::string> names;
  auto add = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  H5_CHECK(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, nullptr, add, &names));
  return names;
}

void h5_unlink(H5Handle parent, const std::string& name) {
  H5Lock lock(h5_mutex());
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0) h5_require_written(H5Ldelete(parent, name.c_str(), H5P_DEFAULT), parent);
}

// ---- attributes ----

void h5_write_attr_string(H5Handle obj, const std::string& name, const std::string& value) {
  H5Lock lock(h5_mutex());
  // Variable-length UTF-8 string: h5py reads it back as a Python str.
  H5Id type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  H5Id space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Id attr(h5_require_created(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), obj));
  const char* p = value.c_str();
  h5_require_written(H5Awrite(attr, type, &p), obj);
}

void h5_write_attr_int(H5Handle obj, const std::string& name, int64_t value) {
  H5Lock lock(h5_mutex());
  H5Id space(H5_CHECK(H5Screate(H5S_SCALAR)));
  H5Id attr(h5_require_created(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), obj));
  h5_require_written(H5Awrite(attr, H5T_NATIVE_INT64, &value), obj);
}

bool h5_has_attr(H5Handle obj, const std::string& name) {
  H5Lock lock(h5_mutex());
  return H5Aexists(obj, name.c_str()) > 0;
}

void h5_delete_attr(H5Handle obj, const std::string& name) {
  H5Lock lock(h5_mutex());
  if (h5_has_attr(obj, name)) h5_require_written(H5Adelete(obj, name.c_str()), obj);
}

// The attribute `name` of obj, opened after checking that it exists and holds exactly
// one element of class `cls` (a scalar, or a simple dataspace of one point).
static H5Id open_scalar_attr(H5Handle obj, const std::string& file_name, const std::string& name, H5T_class_t cls,
                             const char* noun) {
  const std::string where = cat(file_name, ": attribute '", name, "' of ", h5_object_name(obj));
  VLM_REQUIRE(h5_has_attr(obj, name), where, " is missing");
  const hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
  VLM_REQUIRE(a >= 0, where, " cannot be opened (corrupt file?)");
  H5Id attr(a);
  H5Id type(H5Aget_type(attr));
  VLM_REQUIRE(type.valid(), where, " has an unreadable type (corrupt file?)");
  VLM_REQUIRE(H5Tget_class(type) == cls, where, " is not ", noun);
  H5Id space(H5Aget_space(attr));
  VLM_REQUIRE(space.valid(), where, " has an unreadable shape (corrupt file?)");
  const H5S_class_t sc = H5Sget_simple_extent_type(space);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  VLM_REQUIRE(sc == H5S_SCALAR || (sc == H5S_SIMPLE && n == 1), where, " holds ",
              sc == H5S_NULL ? std::string("no value") : cat("an array of ", (long long)n, " elements"), " (expected ",
              noun, ")");
  return attr;
}

std::string h5_read_attr_string(H5Handle obj, const std::string& file_name, const std::string& name) {
  H5Lock lock(h5_mutex());
  H5Id attr = open_scalar_attr(obj, file_name, name, H5T_STRING, "a single string");
  const std::string where = cat(file_name, ": attribute '", name, "' of ", h5_object_name(obj));
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  if (H5Tis_variable_str(type) > 0) {
    H5Id mt(H5_CHECK(H5Tcopy(H5T_C_S1)));
    H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(mt, H5Tget_cset(type)));
    char* p = nullptr;
    VLM_REQUIRE(H5Aread(attr, mt, &p) >= 0, where, " cannot be read (corrupt file?)");
    std::string s = p ? std::string(p, strnlen(p, kMaxAttrStringBytes + 1)) : "";
    H5free_memory(p);
    VLM_REQUIRE(s.size() <= kMaxAttrStringBytes, where, " is longer than ", kMaxAttrStringBytes, " bytes");
    return s;
  }
  const size_t n = H5Tget_size(type);
  VLM_REQUIRE(n >= 1 && n <= kMaxAttrStringBytes, where, " is longer than ", kMaxAttrStringBytes, " bytes");
  std::string s(n, '\0');
  H5Id mt(H5_CHECK(H5Tcopy(type)));
  VLM_REQUIRE(H5Aread(attr, mt, s.data()) >= 0, where, " cannot be read (corrupt file?)");
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t h5_read_attr_int(H5Handle obj, const std::string& file_name, const std::string& name) {
  H5Lock lock(h5_mutex());
  H5Id attr = open_scalar_attr(obj, file_name, name, H5T_INTEGER, "a single integer");
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  const std::string where = cat(file_name, ": attribute '", name, "' of ", h5_object_name(obj));
  // The conversion to int64 must be exact: wider types and u64 values above INT64_MAX are refused.
  VLM_REQUIRE(H5Tget_size(type) <= 8, where, " is an integer wider than 64 bits");
  if (H5Tget_size(type) == 8 && H5Tget_sign(type) == H5T_SGN_NONE) {
    uint64_t u = 0;
    VLM_REQUIRE(H5Aread(attr, H5T_NATIVE_UINT64, &u) >= 0, where, " cannot be read (corrupt file?)");
    VLM_REQUIRE(u <= uint64_t(INT64_MAX), where, "=", u, " is out of range");
    return int64_t(u);
  }
  int64_t v = 0;
  VLM_REQUIRE(H5Aread(attr, H5T_NATIVE_INT64, &v) >= 0, where, " cannot be read (corrupt file?)");
  return v;
}

std::string h5_object_name(H5Handle obj) {
  H5Lock lock(h5_mutex());
  char buf[512];
  const ssize_t n = H5Iget_name(obj, buf, sizeof buf);
  if (n <= 0) return "?";
  return std::string(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
}

}  // namespace vlm

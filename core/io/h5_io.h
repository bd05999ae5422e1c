// Thin, checked helpers over the HDF5 C API used by the dataset writer and reader.
// Invariants:
//  - Every HDF5 call in the project goes through h5_mutex() (the Debian HDF5 build is not
//    thread-safe); callers hold H5Lock while touching any hid_t.
//  - Reader helpers turn user-caused problems (missing file, missing dataset, wrong
//    dtype or rank, implausible size) into UserError naming the file and the dataset;
//    they never allocate from a size read from the file before bounding it.
//  - H5Appender owns an extendable dataset (unlimited first dimension), so writers
//    stream rows to disk and never need the whole dataset in memory.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "data/h5_check.h"

namespace vlm {


// Element types stored by the schema.
enum class H5Elem { U8, I32, I64 };
hid_t h5_native(H5Elem e);  // memory type (H5T_NATIVE_*)
const char* h5_elem_name(H5Elem e);

// ---- writing ----
H5Id h5_create_file(const std::string& path);  // truncates; UserError if it cannot
H5Id h5_create_group(hid_t parent, const std::string& name);
void h5_write_attr_string(hid_t obj, const std::string& name, const std::string& value);
void h5_write_attr_int(hid_t obj, const std::string& name, int64_t value);
// A whole 1-D dataset in one call (chunked + gzip when `gzip` and large enough).
void h5_write_1d(hid_t parent, const std::string& name, H5Elem e, const void* data, int64_t n,
                 bool gzip);

// Extendable dataset [rows, inner...] built by appending rows.
class H5Appender {
 public:
  H5Appender() = default;
  // chunk_rows rows per chunk; gzip_level 0 = no compression.
  H5Appender(hid_t parent, const std::string& name, H5Elem e, std::vector<int64_t> inner,
             int64_t chunk_rows, int gzip_level);
  void append(const void* rows_data, int64_t rows);
  int64_t rows() const { return rows_; }
  void close() { ds_.reset(); }

 private:
  H5Id ds_;
  H5Elem elem_ = H5Elem::U8;
  std::vector<int64_t> inner_;
  int64_t rows_ = 0;
};

// ---- reading ----
// Opens read-only; UserError "<path>: cannot open as HDF5" when missing or not HDF5.
H5Id h5_open_file(const std::string& path);
// True when every component of the absolute `path` ("/a/b") exists.
bool h5_exists(hid_t file, const std::string& path);
// Opens `path`, requiring an integer dtype of e's width and `ndim` dimensions; returns
// the dims. UserError naming file and dataset otherwise.
H5Id h5_open_dataset(hid_t file, const std::string& file_name, const std::string& path, H5Elem e,
                     int ndim, std::vector<int64_t>* dims);
// Reads rows [start, start+count) of a dataset whose rows hold `row_elems` elements.
void h5_read_rows(hid_t ds, H5Elem e, int64_t start, int64_t count, int64_t row_elems, void* out);
// Reads a whole 1-D dataset after checking its length against max_n.
std::vector<int64_t> h5_read_i64(hid_t file, const std::string& file_name, const std::string& path,
                                 int64_t max_n);
std::string h5_read_attr_string(hid_t obj, const std::string& file_name, const std::string& name);
int64_t h5_read_attr_int(hid_t obj, const std::string& file_name, const std::string& name);
bool h5_has_attr(hid_t obj, const std::string& name);

}  // namespace vlm

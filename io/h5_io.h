// Checked helpers over the HDF5 C API, the only code of the project that calls HDF5 (the
// dataset reader and writer of data/storage, `vlm lm logits` and `vlm vision features` use them; only tests call
// the C API directly, as an independent reader and to write malformed files).
// Invariants:
//  - <hdf5.h> stays inside io/: identifiers cross this header as H5Handle (HDF5's
//    hid_t, a 64-bit integer; h5_check.h asserts the two agree), owned by H5Id.
//  - Every HDF5 call in the project holds h5_mutex() (the Debian HDF5 build is not
//    thread-safe); each helper takes the lock itself, and a caller may hold H5Lock
//    around several helpers to make them one step (the mutex is recursive).
//  - Reader helpers turn user-caused problems (missing file, missing dataset, wrong
//    dtype or rank, implausible size, an attribute of the wrong type or shape, a read
//    that fails on corrupt data or a filter this HDF5 lacks) into UserError naming the
//    file and the dataset or attribute; they never allocate from a size read from the
//    file before bounding it by the caller's limit, by the bytes the file stores and by
//    the memory that can be allocated (base/memory_check.h).
//  - Datasets are read only through hard links, with a contiguous, chunked or compact
//    layout and no external storage, so a file cannot make the reader open other files.
//  - A failing HDF5 call whose inputs the caller had already validated is an internal
//    error (H5_CHECK in h5_check.h: expression and file:line).
//  - H5Appender owns an extendable dataset (unlimited first dimension), so writers
//    stream rows to disk and never need the whole dataset in memory.
//  - Datasets are written without modification times (H5Pset_obj_track_times off):
//    the same content written the same way gives a byte-identical file.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vlm {

using H5Handle = int64_t;                  // an HDF5 identifier (hid_t)
inline constexpr H5Handle kH5Invalid = -1;  // H5I_INVALID_HID

// The one lock of every HDF5 call; recursive, so a caller that already holds it can
// call the helpers and close identifiers.
std::recursive_mutex& h5_mutex();
using H5Lock = std::lock_guard<std::recursive_mutex>;

// Owns one identifier and closes it with the matching H5?close on destruction (under
// the lock); move-only, so an identifier is closed exactly once.
class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(H5Handle id) : id_(id) {}
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, kH5Invalid)) {}
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, kH5Invalid);
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { reset(); }

  H5Handle get() const { return id_; }
  H5Handle release() { return std::exchange(id_, kH5Invalid); }  // the caller closes it
  operator H5Handle() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  H5Handle id_ = kH5Invalid;
};

// Element types of the datasets the project stores (little-endian in the file).
enum class H5Elem { U8, I32, I64, F32 };
const char* h5_elem_name(H5Elem e);
size_t h5_elem_size(H5Elem e);

// ---- files, groups, links, attributes ----
H5Id h5_create_file(const std::string& path);   // truncates; UserError if it cannot
// Writes the HDF5 file `path` so that it is never seen half-written: `write` fills a
// file created under an AtomicFile's temporary name (io/atomic_file.h), which is closed
// (checked, h5_close_file) and then renamed over `path`. When `write` or the close
// throws, the temporary is removed, any previous `path` is left as it was, and the
// exception propagates.
void h5_write_file_atomic(const std::string& path, const std::function<void(H5Handle file)>& write);
H5Id h5_open_file(const std::string& path);     // read-only; UserError "<path>: cannot open as ..."
H5Id h5_open_file_rw(const std::string& path);  // read-write; UserError "<path>: cannot open for writing"
// Writes failing for lack of space (disk full, quota, file size limit) are UserErrors
// "<file>: write failed (<why>)", not internal errors: <file> is the final name of the
// file `obj` belongs to, <why> the system error HDF5 met (strerror: "No space left on
// device") or else HDF5's own reason; the writers' callers then leave the final file
// untouched (io/atomic_file.h). Every call that may write to a file goes through one
// of these two (dataset, group and attribute creation included: HDF5 may write its
// metadata then).
void h5_require_written(long long status, H5Handle obj);  // status of an HDF5 write call
H5Handle h5_require_created(H5Handle id, H5Handle parent);  // an identifier created in parent
void h5_flush(H5Handle file);
// Flushes and closes `file` (invalid afterwards), checking both; writers call it before
// committing their AtomicFile, since a close that fails leaves an incomplete file.
void h5_close_file(H5Id& file);
H5Id h5_create_group(H5Handle parent, const std::string& name);
H5Id h5_open_group(H5Handle parent, const std::string& name);  // must exist (checked by the caller)
// True when every component of the absolute `path` ("/a/b") exists.
bool h5_exists(H5Handle file, const std::string& path);
// The names of the links of an open group, in name order.
std::vector<std::string> h5_list(H5Handle group);
// Removes the link `name` of `parent` when present (HDF5 does not reclaim the space;
// h5repack does).
void h5_unlink(H5Handle parent, const std::string& name);

void h5_write_attr_string(H5Handle obj, const std::string& name, const std::string& value);  // UTF-8
void h5_write_attr_int(H5Handle obj, const std::string& name, int64_t value);
bool h5_has_attr(H5Handle obj, const std::string& name);
void h5_delete_attr(H5Handle obj, const std::string& name);  // when present
// Attribute readers: the attribute must exist and hold one value (a scalar or a
// one-element array) of the right class; strings at most kMaxAttrStringBytes; integers
// of at most 64 bits whose value fits int64. UserError "<file>: attribute 'name' of
// <object> ..." otherwise.
inline constexpr size_t kMaxAttrStringBytes = size_t(1) << 20;
std::string h5_read_attr_string(H5Handle obj, const std::string& file_name, const std::string& name);
int64_t h5_read_attr_int(H5Handle obj, const std::string& file_name, const std::string& name);
// The path of an open object inside its file ("/images"), for messages.
std::string h5_object_name(H5Handle obj);

// ---- writing datasets (h5_write.cpp) ----
// A whole 1-D dataset in one call (chunked; gzip 4 + shuffle when `gzip` and n >= 4096).
void h5_write_1d(H5Handle parent, const std::string& name, H5Elem e, const void* data, int64_t n,
                 bool gzip);
// A whole dataset of shape `dims` (row-major data) in one call, contiguous layout.
void h5_write_array(H5Handle parent, const std::string& name, H5Elem e, const void* data,
                    const std::vector<int64_t>& dims);

// Extendable dataset [rows, inner...] built by appending rows.
class H5Appender {
 public:
  H5Appender() = default;
  // chunk_rows rows per chunk; gzip_level 0 = no compression.
  H5Appender(H5Handle parent, const std::string& name, H5Elem e, std::vector<int64_t> inner,
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

// ---- reading datasets ----
// A filtered (compressed) dataset may declare at most this many times the bytes it
// stores (deflate's limit is 1032:1), so a small file cannot announce terabytes.
inline constexpr uint64_t kH5MaxFilterRatio = 1100;

// Opens `path` (hard links only), requiring e's dtype class and width (64-bit integers
// may be signed or unsigned, as h5py users write either), `ndim` dimensions each below
// 2^50 with a product of bytes below 2^62, a contiguous/chunked/compact layout without
// external files, and every filter available in this HDF5; returns the dims. UserError
// naming file and dataset otherwise.
H5Id h5_open_dataset(H5Handle file, const std::string& file_name, const std::string& path, H5Elem e,
                     int ndim, std::vector<int64_t>* dims);
// The dimensions of an open dataset.
std::vector<int64_t> h5_extent(H5Handle ds);
// Reads rows [start, start+count) of a dataset whose rows hold `row_elems` elements. A
// failing read (corrupt chunk, missing filter) is a UserError naming file and dataset.
void h5_read_rows(H5Handle ds, H5Elem e, int64_t start, int64_t count, int64_t row_elems, void* out);
// Before reading the whole of an open dataset of `bytes` bytes into memory: the file
// must store them (unfiltered: all of them; filtered: kH5MaxFilterRatio) and the memory
// must be allocatable. UserError naming file and dataset otherwise.
void h5_check_whole_read(H5Handle ds, const std::string& file_name, const std::string& path, uint64_t bytes);
// A whole 1-D i64 / i32 dataset: its length must be `expect` when expect >= 0, else at
// most max_n (messages: "<file>: dataset <path> has N entries (...)"); then
// h5_check_whole_read.
std::vector<int64_t> h5_read_i64(H5Handle file, const std::string& file_name, const std::string& path,
                                 int64_t max_n, int64_t expect = -1);
std::vector<int32_t> h5_read_i32(H5Handle file, const std::string& file_name, const std::string& path,
                                 int64_t max_n, int64_t expect = -1);

}  // namespace vlm

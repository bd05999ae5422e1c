// Tests of the HDF5 helpers (io/h5_io.h) that the dataset tests in tests/data do not
// reach: the whole-array writer (f32 [T, V], as `vlm lm logits` writes), dataset
// dtype/rank refusals for f32, unlinking and attribute removal, the read-write open,
// the atomic whole-file write (temporary name, then rename).
// Files are checked with the HDF5 C API directly, independently of the helpers.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "io/h5_io.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

using test::error_of;

namespace fs = std::filesystem;

// <a scratch folder of this process>/name.
std::string scratch(const std::string& name) {
  static const std::string dir = test::scratch_dir("io_h5");
  return dir + "/" + name;
}

TEST(H5Io, ArrayF32RoundTrip) {
  const std::string path = scratch("array.h5");
  const int64_t T = 3, V = 5;
  std::vector<float> v(size_t(T * V));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * float(i) - 1.5f;
  {
    H5Id f = h5_create_file(path);
    h5_write_array(f, "logits", H5Elem::F32, v.data(), {T, V});
    h5_write_attr_string(f, "format", "x");
  }
  // The C API sees an IEEE f32 [3, 5] dataset with the values.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t d = H5Dopen2(f, "logits", H5P_DEFAULT);
  hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  EXPECT_EQ(H5Tget_class(t), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(t), 4u);
  hsize_t dims[2] = {0, 0};
  ASSERT_EQ(H5Sget_simple_extent_ndims(s), 2);
  H5Sget_simple_extent_dims(s, dims, nullptr);
  EXPECT_EQ(dims[0], hsize_t(T));
  EXPECT_EQ(dims[1], hsize_t(V));
  std::vector<float> back(v.size());
  H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data());
  EXPECT_EQ(back, v);
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);

  // The checked reader agrees, and refuses the wrong dtype or rank naming the dataset.
  H5Id r = h5_open_file(path);
  std::vector<int64_t> got;
  H5Id ds = h5_open_dataset(r, path, "/logits", H5Elem::F32, 2, &got);
  EXPECT_EQ(got, (std::vector<int64_t>{T, V}));
  EXPECT_EQ(h5_extent(ds), got);
  std::vector<float> row(static_cast<size_t>(V));
  h5_read_rows(ds, H5Elem::F32, 1, 1, V, row.data());
  EXPECT_EQ(row, std::vector<float>(v.begin() + V, v.begin() + 2 * V));
  EXPECT_NE(error_of([&] { h5_open_dataset(r, path, "/logits", H5Elem::I32, 2, nullptr); })
                .find("/logits has the wrong dtype (expected int32)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { h5_open_dataset(r, path, "/logits", H5Elem::F32, 1, nullptr); })
                .find("/logits has 2 dimensions (expected 1)"),
            std::string::npos);
}

TEST(H5Io, UnlinkAndDeleteAttribute) {
  const std::string path = scratch("unlink.h5");
  {
    H5Id f = h5_create_file(path);
    H5Id g = h5_create_group(f, "g");
    const std::vector<int32_t> a{1, 2, 3};
    h5_write_1d(g, "a", H5Elem::I32, a.data(), 3, false);
    h5_write_attr_string(g, "name", "old");
  }
  {
    H5Id f = h5_open_file_rw(path);
    H5Id g = h5_open_group(f, "g");
    EXPECT_TRUE(h5_exists(f, "/g/a"));
    h5_unlink(g, "a");
    h5_unlink(g, "never_there");  // absent: nothing to do
    h5_delete_attr(g, "name");
    h5_delete_attr(g, "never_there");
    EXPECT_FALSE(h5_exists(f, "/g/a"));
    EXPECT_FALSE(h5_has_attr(g, "name"));
    const std::vector<int64_t> b{7, 8};
    h5_write_1d(g, "a", H5Elem::I64, b.data(), 2, true);
    h5_write_attr_string(g, "name", "new");
  }
  H5Id f = h5_open_file(path);
  EXPECT_EQ(h5_read_i64(f, path, "/g/a", 10), (std::vector<int64_t>{7, 8}));
  H5Id g = h5_open_group(f, "g");
  EXPECT_EQ(h5_read_attr_string(g, path, "name"), "new");
}

TEST(H5Io, OpenErrorsNameTheFile) {
  const std::string missing = scratch("no_such_dir") + "/x.h5";
  EXPECT_NE(error_of([&] { h5_open_file_rw(missing); }).find(missing + ": cannot open for writing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { h5_open_file(missing); }).find(missing + ": cannot open as an HDF5 file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { h5_create_file(missing); }).find(missing + ": cannot create HDF5 file"),
            std::string::npos);
}

// h5_write_file_atomic: the file appears complete under its name; a writer that throws
// leaves the previous file as it was and no temporary behind.
TEST(H5Io, AtomicWriteReplacesOnlyWhenComplete) {
  const std::string path = scratch("atomic.h5");
  const fs::path dir = fs::path(path).parent_path();
  auto temporaries = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir))  // .atomic.h5.tmp-<pid>-<n> (io/atomic_file.h)
      n += e.path().filename().string().rfind(".atomic.h5.tmp-", 0) == 0;
    return n;
  };
  const std::vector<int64_t> first{1, 2, 3}, second{4, 5};
  h5_write_file_atomic(path, [&](H5Handle f) { h5_write_1d(f, "v", H5Elem::I64, first.data(), 3, false); });
  EXPECT_EQ(h5_read_i64(h5_open_file(path), path, "/v", 10), first);
  EXPECT_EQ(temporaries(), 0);

  const std::string msg = error_of([&] {
    h5_write_file_atomic(path, [&](H5Handle f) {
      h5_write_1d(f, "v", H5Elem::I64, second.data(), 2, false);
      EXPECT_EQ(temporaries(), 1);  // written beside the file, under another name
      throw UserError("writer failed");
    });
  });
  EXPECT_EQ(msg, "writer failed");
  EXPECT_EQ(h5_read_i64(h5_open_file(path), path, "/v", 10), first);
  EXPECT_EQ(temporaries(), 0);

  h5_write_file_atomic(path, [&](H5Handle f) { h5_write_1d(f, "v", H5Elem::I64, second.data(), 2, false); });
  EXPECT_EQ(h5_read_i64(h5_open_file(path), path, "/v", 10), second);
  const std::string bad = scratch("no_such_dir") + "/x.h5";
  EXPECT_NE(error_of([&] { h5_write_file_atomic(bad, [](H5Handle) {}); }).find(bad + ": cannot write, the folder "),
            std::string::npos);
}

// A corrupt gzip chunk read on a thread that never called HDF5 before (as the loader's
// workers): a UserError naming the file and dataset, and nothing from HDF5 on stderr (its
// error stack, which it prints by default, is per thread).
TEST(H5Io, ACorruptChunkOnAnotherThreadPrintsNothing) {
  const std::string path = scratch("corrupt_chunk.h5");
  std::vector<uint8_t> rows(64 * 256);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint8_t((i * 7) % 251);
  h5_write_file_atomic(path, [&](H5Handle f) {
    H5Appender a(f, "x", H5Elem::U8, {256}, 16, 4);
    a.append(rows.data(), 64);
  });
  haddr_t at = 0;
  hsize_t size = 0;
  {
    H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    H5Id ds(H5Dopen2(f, "x", H5P_DEFAULT));
    hsize_t offset[2];
    unsigned mask = 0;
    H5Id space(H5Dget_space(ds));
    ASSERT_GE(H5Dget_chunk_info(ds, space, 1, offset, &mask, &at, &size), 0);
  }
  ASSERT_GT(size, 24u);
  std::string bytes = test::read_file(path);
  for (size_t i = 4; i < 20; ++i) bytes[size_t(at) + i] = char(bytes[size_t(at) + i] ^ 0x5A);
  test::write_file(path, bytes);

  std::string msg;
  const std::string printed = test::stderr_of([&] {
    std::thread t([&] {
      msg = error_of([&] {
        H5Id f = h5_open_file(path);
        H5Id ds = h5_open_dataset(f, path, "/x", H5Elem::U8, 2, nullptr);
        std::vector<uint8_t> out(16 * 256);
        h5_read_rows(ds, H5Elem::U8, 16, 16, 256, out.data());
      });
    });
    t.join();
  });
  EXPECT_NE(msg.find(path + ": dataset /x: reading 16 rows from row 16 failed"), std::string::npos) << msg;
  EXPECT_EQ(printed, "") << "HDF5 printed its error stack";
}

}  // namespace
}  // namespace vlm

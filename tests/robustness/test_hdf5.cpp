// Malformed HDF5 datasets (data/storage/dataset.h through io/h5_io.h): a valid file
// made by `vlm data build` is edited with the HDF5 C API into attributes of the wrong
// type or shape, datasets with unavailable filters, corrupt chunks, declared sizes the
// file does not store, links and external storage, wrong dtypes and ranks, offsets and
// indices out of order or range; then `vlm data inspect` (or tokenize) must refuse it.
#include <hdf5.h>

#include <functional>

#include "robustness.h"

namespace vlm::robustness {
namespace {

class H5 : public Robust {
 protected:
  void SetUp() override {
    Robust::SetUp();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    make_dataset("ds.h5");
  }
  // Opens ds.h5 read-write, runs fn on it, closes it.
  void edit(const std::function<void(hid_t)>& fn) {
    const hid_t f = H5Fopen(path("ds.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    fn(f);
    ASSERT_GE(H5Fclose(f), 0);
  }
  void inspect(const std::vector<std::string>& needles) { refused({"data", "inspect", "ds.h5"}, needles); }
};

// A 1-D dataset `name` of `type` holding `v` (replacing an existing one).
template <typename T>
void put(hid_t f, const char* name, hid_t type, const std::vector<T>& v, hid_t dcpl = H5P_DEFAULT) {
  if (H5Lexists(f, name, H5P_DEFAULT) > 0) H5Ldelete(f, name, H5P_DEFAULT);
  const hsize_t n = v.size();
  const hid_t s = H5Screate_simple(1, &n, nullptr);
  const hid_t d = H5Dcreate2(f, name, type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0) << name;
  if (!v.empty()) {
    ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  }
  H5Dclose(d);
  H5Sclose(s);
}

void put_attr_i64_array(hid_t obj, const char* name, const std::vector<int64_t>& v) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  const hsize_t n = v.size();
  const hid_t s = H5Screate_simple(1, &n, nullptr);
  const hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, v.data());
  H5Aclose(a);
  H5Sclose(s);
}

void put_attr_strings(hid_t obj, const char* name, const std::vector<std::string>& v, bool scalar = false) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  const hsize_t n = v.size();
  const hid_t s = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  std::vector<const char*> p;
  for (const auto& x : v) p.push_back(x.c_str());
  const hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, p.data());
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
}

// ---- attributes of the wrong type or shape (these crashed the reader) ----

TEST_F(H5, FormatIsAnArrayOfStrings) {
  edit([](hid_t f) { put_attr_strings(f, "format", {"vlm-image-text", "vlm-image-text"}); });
  inspect({"ds.h5", "'format'", "an array of 2"});
}

TEST_F(H5, VersionIsAnArray) {
  edit([](hid_t f) { put_attr_i64_array(f, "version", {1, 1, 1}); });
  inspect({"ds.h5", "'version'", "an array of 3"});
}

TEST_F(H5, VersionIsAString) {
  edit([](hid_t f) { put_attr_strings(f, "version", {"1"}, true); });
  inspect({"ds.h5", "'version'", "not a single integer"});
}

TEST_F(H5, FormatIsAnInteger) {
  edit([](hid_t f) { put_attr_i64_array(f, "format", {7}); });
  inspect({"ds.h5", "'format'", "not a single string"});
}

TEST_F(H5, VersionBeyondInt64) {
  edit([](hid_t f) {
    H5Adelete(f, "version");
    const hid_t s = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "version", H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    const uint64_t v = ~uint64_t(0);
    H5Awrite(a, H5T_NATIVE_UINT64, &v);
    H5Aclose(a);
    H5Sclose(s);
  });
  inspect({"ds.h5", "'version'", "18446744073709551615"});
}

TEST_F(H5, VersionWithoutAValue) {
  edit([](hid_t f) {
    H5Adelete(f, "version");
    const hid_t s = H5Screate(H5S_NULL);
    H5Aclose(H5Acreate2(f, "version", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(s);
  });
  inspect({"ds.h5", "'version'", "no value"});
}

TEST_F(H5, UnknownFormat) {
  edit([](hid_t f) { put_attr_strings(f, "format", {"something-else"}, true); });
  inspect({"ds.h5", "'format'", "something-else"});
}

TEST_F(H5, ClassNamesIsAnIntegerArray) {
  edit([](hid_t f) {
    put<int32_t>(f, "/images/label", H5T_NATIVE_INT32, {0, 1, 2});
    const hid_t g = H5Gopen2(f, "/images", H5P_DEFAULT);
    put_attr_i64_array(g, "class_names", {1, 2});
    H5Gclose(g);
  });
  inspect({"ds.h5", "'class_names'", "/images"});
}

TEST_F(H5, TokenizerNameIsAnArray) {
  edit([](hid_t f) {
    put<int32_t>(f, "/captions/tokens", H5T_NATIVE_INT32, {1, 2, 3});
    put<int64_t>(f, "/captions/token_offsets", H5T_NATIVE_INT64, {0, 1, 2, 3});
    const hid_t g = H5Gopen2(f, "/captions", H5P_DEFAULT);
    put_attr_strings(g, "tokenizer", {"a.json", "b.json"});
    H5Gclose(g);
  });
  inspect({"ds.h5", "'tokenizer'", "an array of 2"});
}

TEST_F(H5, SourceLongerThanAMegabyte) {
  edit([](hid_t f) { put_attr_strings(f, "source", {std::string((1 << 20) + 10, 's')}, true); });
  inspect({"ds.h5", "'source'", "longer than"});
}

TEST_F(H5, BadAttributeAlsoStopsTokenize) {
  const RunResult t = run_vlm({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300", "--data.out",
                               "tok.json"},
                              dir_);
  ASSERT_EQ(t.code, 0) << t.err;
  edit([](hid_t f) { put_attr_i64_array(f, "version", {1, 2}); });
  refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, {"ds.h5", "'version'"});
}

// ---- storage: filters, corrupt chunks, declared sizes the file does not hold ----

size_t pass_through(unsigned, size_t, const unsigned[], size_t nbytes, size_t*, void**) { return nbytes; }

TEST_F(H5, FilterThisHdf5DoesNotHave) {
  // A filter registered in this process only: the vlm process does not have it.
  static const H5Z_class2_t kFilter = {H5Z_CLASS_T_VERS, H5Z_filter_t(32000), 1, 1, "vlm-test-filter", nullptr,
                                       nullptr, pass_through};
  ASSERT_GE(H5Zregister(&kFilter), 0);
  edit([](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk = 16;
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_filter(dcpl, H5Z_filter_t(32000), H5Z_FLAG_MANDATORY, 0, nullptr);
    put<uint8_t>(f, "/captions/text", H5T_NATIVE_UINT8, std::vector<uint8_t>(48, 'x'), dcpl);
    H5Pclose(dcpl);
  });
  inspect({"ds.h5", "/captions/text", "filter 'vlm-test-filter'"});
}

TEST_F(H5, CorruptCompressedChunk) {
  haddr_t addr = 0;
  hsize_t size = 0;
  edit([&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t chunk = 3;
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_deflate(dcpl, 6);
    put<int64_t>(f, "/captions/image", H5T_NATIVE_INT64, {0, 1, 2}, dcpl);
    H5Pclose(dcpl);
    const hid_t d = H5Dopen2(f, "/captions/image", H5P_DEFAULT);
    const hid_t s = H5Dget_space(d);
    unsigned mask = 0;
    hsize_t offset[1];
    ASSERT_GE(H5Dget_chunk_info(d, s, 0, offset, &mask, &addr, &size), 0);
    H5Sclose(s);
    H5Dclose(d);
  });
  ASSERT_GT(size, 0u);
  std::string bytes = read_file(path("ds.h5"));
  for (hsize_t k = 0; k < size; ++k) bytes[size_t(addr + k)] = char(0xA5 ^ k);
  write("ds.h5", bytes);
  inspect({"ds.h5", "/captions/image", "failed"});
}

TEST_F(H5, DatasetNeverWritten) {
  edit([](hid_t f) {
    H5Ldelete(f, "/images/height", H5P_DEFAULT);
    const hsize_t n = 3;
    const hid_t s = H5Screate_simple(1, &n, nullptr);
    H5Dclose(H5Dcreate2(f, "/images/height", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(s);
  });
  inspect({"ds.h5", "/images/height", "declares 12 bytes but the file stores 0"});
}

TEST_F(H5, CompressionBomb) {
  edit([](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    const hsize_t n = hsize_t(1) << 30, chunk = hsize_t(1) << 20;
    const hid_t s = H5Screate_simple(1, &n, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_deflate(dcpl, 9);
    const hid_t d = H5Dcreate2(f, "/captions/image", H5T_STD_I64LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    std::vector<int64_t> zeros(chunk, 0);
    const hsize_t start = 0;
    H5Sselect_hyperslab(s, H5S_SELECT_SET, &start, nullptr, &chunk, nullptr);
    const hid_t m = H5Screate_simple(1, &chunk, nullptr);
    H5Dwrite(d, H5T_NATIVE_INT64, m, s, H5P_DEFAULT, zeros.data());
    H5Sclose(m);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);
  });
  inspect({"ds.h5", "/captions/image", "declares 8589934592 bytes"});
}

TEST_F(H5, CountNeedingTerabytes) {
  edit([](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    const hsize_t n = hsize_t(1) << 40, mx = H5S_UNLIMITED, chunk = 1024;
    const hid_t s = H5Screate_simple(1, &n, &mx);
    const hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(p, 1, &chunk);
    H5Dclose(H5Dcreate2(f, "/captions/image", H5T_STD_I64LE, s, H5P_DEFAULT, p, H5P_DEFAULT));
    H5Pclose(p);
    H5Sclose(s);
  });
  inspect({"ds.h5", "/captions/image", "1099511627776 entries"});
}

TEST_F(H5, ExternalStorage) {
  write("ext.bin", std::string(12, '\0'));
  edit([&](hid_t f) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, path("ext.bin").c_str(), 0, 12);
    put<int32_t>(f, "/images/height", H5T_NATIVE_INT32, {20, 20, 20}, dcpl);
    H5Pclose(dcpl);
  });
  inspect({"ds.h5", "/images/height", "external files"});
}

// ---- links ----

TEST_F(H5, SoftLink) {
  edit([](hid_t f) {
    H5Lmove(f, "/captions/text", f, "/captions/text_real", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_soft("/captions/text_real", f, "/captions/text", H5P_DEFAULT, H5P_DEFAULT);
  });
  inspect({"ds.h5", "/captions/text", "soft link"});
}

TEST_F(H5, ExternalLink) {
  edit([](hid_t f) {
    H5Ldelete(f, "/captions/text", H5P_DEFAULT);
    H5Lcreate_external("/etc/other.h5", "/x", f, "/captions/text", H5P_DEFAULT, H5P_DEFAULT);
  });
  inspect({"ds.h5", "/captions/text", "external link"});
}

// ---- dtype, rank, values ----

TEST_F(H5, GroupWhereADatasetBelongs) {
  edit([](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    H5Gclose(H5Gcreate2(f, "/captions/image", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  });
  inspect({"ds.h5", "/captions/image", "not a dataset"});
}

TEST_F(H5, ScalarWhereAnArrayBelongs) {
  edit([](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    const hid_t s = H5Screate(H5S_SCALAR);
    H5Dclose(H5Dcreate2(f, "/captions/image", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(s);
  });
  inspect({"ds.h5", "/captions/image", "0 dimensions"});
}

TEST_F(H5, OffsetsAsFloats) {
  edit([](hid_t f) { put<float>(f, "/images/offsets", H5T_NATIVE_FLOAT, {0, 1, 2, 3}); });
  inspect({"ds.h5", "/images/offsets", "wrong dtype"});
}

TEST_F(H5, TextOffsetsRunBackwards) {
  edit([](hid_t f) { put<int64_t>(f, "/captions/text_offsets", H5T_NATIVE_INT64, {0, 16, 8, 48}); });
  inspect({"ds.h5", "/captions/text_offsets", "runs backwards"});
}

TEST_F(H5, TextOffsetsEndElsewhere) {
  edit([](hid_t f) { put<int64_t>(f, "/captions/text_offsets", H5T_NATIVE_INT64, {0, 16, 32, 40}); });
  inspect({"ds.h5", "/captions/text_offsets", "ends at 40"});
}

TEST_F(H5, TextOffsetsWrongCount) {
  edit([](hid_t f) { put<int64_t>(f, "/captions/text_offsets", H5T_NATIVE_INT64, {0, 48}); });
  inspect({"ds.h5", "/captions/text_offsets", "2 entries (expected 4)"});
}

TEST_F(H5, CaptionNamesAMissingImage) {
  edit([](hid_t f) { put<int64_t>(f, "/captions/image", H5T_NATIVE_INT64, {0, 1, 7}); });
  inspect({"ds.h5", "/captions/image", "names image 7"});
}

TEST_F(H5, NegativeSplitIndex) {
  edit([](hid_t f) { put<int64_t>(f, "/splits/train", H5T_NATIVE_INT64, {-1}); });
  inspect({"ds.h5", "/splits/train", "names image -1"});
}

TEST_F(H5, ATokenizerNeedsTrainCaptions) {
  edit([](hid_t f) { put<int64_t>(f, "/splits/train", H5T_NATIVE_INT64, {}); });
  refused({"data", "tokenizer", "--data.train", "ds.h5", "--data.out", "tok.json"},
          {"ds.h5: the train split has no caption"});
}

TEST_F(H5, NegativeImageHeight) {
  edit([](hid_t f) { put<int32_t>(f, "/images/height", H5T_NATIVE_INT32, {-3, 20, 20}); });
  inspect({"ds.h5", "image 0", "implausible size"});
}

TEST_F(H5, TokenOffsetsPastTheTokens) {
  edit([](hid_t f) {
    put<int32_t>(f, "/captions/tokens", H5T_NATIVE_INT32, {1, 2, 3, 4, 5});
    put<int64_t>(f, "/captions/token_offsets", H5T_NATIVE_INT64, {0, 2, 4, 6});
  });
  inspect({"ds.h5", "/captions/token_offsets", "ends at 6"});
}

// ---- not a dataset file at all ----

TEST_F(H5, NotHdf5) {
  write("ds.h5", "this is not an HDF5 file");
  inspect({"ds.h5", "HDF5"});
}

TEST_F(H5, TruncatedFile) {
  const std::string bytes = read_file(path("ds.h5"));
  write("ds.h5", bytes.substr(0, bytes.size() / 2));
  inspect({"ds.h5", "HDF5"});
}

TEST_F(H5, DirectoryAsDataset) {
  std::filesystem::create_directories(path("dir.h5"));
  refused({"data", "inspect", "dir.h5"}, {"dir.h5"});
}

}  // namespace
}  // namespace vlm::robustness

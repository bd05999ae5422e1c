// Schema writer/reader round trip and the reader's refusals of bad files: not HDF5,
// wrong schema version, missing dataset, wrong dtype, and size fields that would need
// terabytes (each must be a UserError naming the file and the dataset, with no attempt
// to allocate); token datasets written, then replaced, by tokenize_captions.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <opencv2/imgcodecs.hpp>

#include "base/error.h"
#include "data/convert/converters.h"
#include "data/image/image_pipeline.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"
#include "data/text/tokenizer.h"
#include "test_util.h"

using namespace vlm;

namespace {

std::vector<uint8_t> png_of(int h, int w, int seed) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(seed + x), uchar(y * 7), uchar(x * y));
  std::vector<uint8_t> buf;
  cv::imencode(".png", m, buf);
  return buf;
}

// Three images, four captions (image 1 has two), splits 0 | 1 | 2.
std::string make_small(const std::string& dir) {
  const std::string path = dir + "/small.h5";
  DatasetWriter w = DatasetWriter::encoded(path);
  for (int i = 0; i < 3; ++i) {
    const auto png = png_of(10 + i, 20, i * 10);
    w.add_encoded(png.data(), png.size(), 10 + i, 20, 3);
  }
  w.add_caption(0, "zero");
  w.add_caption(1, "one", "what is it?");
  w.add_caption(1, "uno");
  w.add_caption(2, "two \xC3\xA9");
  w.set_split(schema::kSplitTrain, {0});
  w.set_split(schema::kSplitVal, {1});
  w.set_split(schema::kSplitTest, {2});
  w.finish();
  return path;
}

void expect_user_error(const std::string& path, const std::string& needle) {
  try {
    DatasetReader r(path);
    FAIL() << "no error for " << needle;
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

void write_i64(hid_t file, const char* name, const std::vector<int64_t>& v) {
  hsize_t n = v.size();
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(file, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d);
  H5Sclose(s);
}

}  // namespace

TEST(H5Schema, RoundTripThroughReaderAndCApi) {
  const std::string dir = test::scratch_dir("schema_rt");
  const std::string path = make_small(dir);
  DatasetReader r(path);
  EXPECT_EQ(r.num_images(), 3);
  EXPECT_EQ(r.num_captions(), 4);
  EXPECT_EQ(r.caption(2), "uno");
  EXPECT_EQ(r.caption(3), "two \xC3\xA9");
  EXPECT_EQ(r.prompt(1), "what is it?");
  EXPECT_EQ(r.prompt(0), "");
  EXPECT_EQ(r.caption_image(2), 1);
  EXPECT_EQ(r.image_info(2).height, 12);
  EXPECT_EQ(r.image_data(1), png_of(11, 20, 10));
  EXPECT_EQ(r.split_captions("val"), (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(r.has_tokens());

  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_EQ(test::h5_str_attr(f, "format"), "vlm-image-text");
  EXPECT_EQ(test::h5_int_attr(f, "version"), 1);
  EXPECT_EQ(test::h5_str_attr(f, "image_storage"), "encoded");
  EXPECT_EQ(test::h5_i64(f, "/captions/image"), (std::vector<int64_t>{0, 1, 1, 2}));
  EXPECT_EQ(test::h5_i64(f, "/captions/text_offsets"), (std::vector<int64_t>{0, 4, 7, 10, 16}));
  const auto off = test::h5_i64(f, "/images/offsets");
  const auto bytes = test::h5_u8(f, "/images/encoded");
  ASSERT_EQ(off.size(), 4u);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + off[2], bytes.begin() + off[3]), png_of(12, 20, 20));
  EXPECT_EQ(test::h5_i64(f, "/splits/test"), (std::vector<int64_t>{2}));
  H5Fclose(f);
}

TEST(H5Schema, NotHdf5) {
  const std::string dir = test::scratch_dir("schema_nothdf5");
  test::write_file(dir + "/x.h5", "this is not hdf5");
  expect_user_error(dir + "/x.h5", "HDF5");
  expect_user_error(dir + "/missing.h5", "HDF5");
}

TEST(H5Schema, WrongVersion) {
  const std::string path = make_small(test::scratch_dir("schema_version"));
  test::h5_edit(path, [](hid_t f) {
    hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
    const int64_t v = schema::kVersion + 1;  // 3: versions 1 and 2 are read (test_h5_caption_boxes.cpp)
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  });
  expect_user_error(path, "version 3");
}

TEST(H5Schema, WrongFormat) {
  const std::string path = make_small(test::scratch_dir("schema_format"));
  test::h5_edit(path, [](hid_t f) { H5Adelete(f, "format"); });
  expect_user_error(path, "'format'");
}

TEST(H5Schema, MissingDataset) {
  const std::string path = make_small(test::scratch_dir("schema_missing"));
  test::h5_edit(path, [](hid_t f) { H5Ldelete(f, "/captions/image", H5P_DEFAULT); });
  expect_user_error(path, "/captions/image is missing");
}

TEST(H5Schema, WrongDtype) {
  const std::string path = make_small(test::scratch_dir("schema_dtype"));
  test::h5_edit(path, [](hid_t f) {
    H5Ldelete(f, "/images/height", H5P_DEFAULT);
    hsize_t n = 3;
    hid_t s = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "/images/height", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(s);
  });
  expect_user_error(path, "/images/height has the wrong dtype");
}

TEST(H5Schema, OffsetNeedingTerabytes) {
  const std::string path = make_small(test::scratch_dir("schema_tb"));
  test::h5_edit(path, [](hid_t f) {
    H5Ldelete(f, "/images/offsets", H5P_DEFAULT);
    write_i64(f, "/images/offsets", {0, int64_t(1) << 41, (int64_t(1) << 41) + 5, (int64_t(1) << 41) + 9});
  });
  expect_user_error(path, "/images/offsets entry 0 has length 2199023255552");
}

TEST(H5Schema, CountNeedingTerabytes) {
  // A chunked dataset can claim 2^40 entries while storing none: the reader must refuse
  // from the dims alone.
  const std::string path = make_small(test::scratch_dir("schema_count"));
  test::h5_edit(path, [](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    hsize_t n = hsize_t(1) << 40, mx = H5S_UNLIMITED, chunk = 1024;
    hid_t s = H5Screate_simple(1, &n, &mx);
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(p, 1, &chunk);
    hid_t d = H5Dcreate2(f, "/captions/image", H5T_STD_I64LE, s, H5P_DEFAULT, p, H5P_DEFAULT);
    H5Dclose(d);
    H5Pclose(p);
    H5Sclose(s);
  });
  expect_user_error(path, "/captions/image has 1099511627776 entries");
}

TEST(H5Schema, CaptionPointsPastImages) {
  const std::string path = make_small(test::scratch_dir("schema_capidx"));
  test::h5_edit(path, [](hid_t f) {
    H5Ldelete(f, "/captions/image", H5P_DEFAULT);
    write_i64(f, "/captions/image", {0, 1, 7, 2});
  });
  expect_user_error(path, "names image 7");
}

// Splits ascending, each image once, in at most one split (docs/dataset-format.md).
TEST(H5Schema, SplitsAscendingAndDisjoint) {
  const std::string dir = test::scratch_dir("schema_splits");
  struct Case {
    const char* name;
    std::vector<int64_t> train, val;
    const char* needle;
  };
  for (const Case& c : {Case{"reversed", {2, 0}, {1}, "/splits/train is not ascending at entry 1 (2 then 0"},
                        Case{"repeated", {0, 0}, {1}, "/splits/train is not ascending at entry 1 (0 then 0"},
                        Case{"overlapping", {0, 1}, {1}, "image 1 is in both /splits/train and /splits/val"},
                        Case{"overlapping test", {0}, {1, 2}, "image 2 is in both /splits/val and /splits/test"}}) {
    SCOPED_TRACE(c.name);
    const std::string path = make_small(dir);
    test::h5_edit(path, [&](hid_t f) {
      H5Ldelete(f, "/splits/train", H5P_DEFAULT);
      H5Ldelete(f, "/splits/val", H5P_DEFAULT);
      write_i64(f, "/splits/train", c.train);
      write_i64(f, "/splits/val", c.val);
    });
    expect_user_error(path, c.needle);
  }
}

// Image labels within the class names, the names UTF-8; raw images of their stored size.
TEST(H5Schema, LabelsAndRawSizes) {
  const std::string dir = test::scratch_dir("schema_labels");
  const std::string path = dir + "/raw.h5";
  auto build = [&](std::vector<int32_t> labels, const std::vector<std::string>& names, int32_t height0) {
    DatasetWriter w = DatasetWriter::raw(path, 4, 5, 1);
    const std::vector<uint8_t> px(20, 7);
    for (int i = 0; i < 3; ++i) w.add_raw(px.data());
    for (int i = 0; i < 3; ++i) w.add_caption(i, "c");
    w.set_labels(std::move(labels), names);
    w.set_split(schema::kSplitTrain, {0, 1, 2});
    w.finish();
    if (height0 != 4)
      test::h5_edit(path, [&](hid_t f) {
        hid_t d = H5Dopen2(f, "/images/height", H5P_DEFAULT);
        const int32_t h[3] = {height0, 4, 4};
        H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, h);
        H5Dclose(d);
      });
  };
  build({0, 1, 1}, {"a", "b"}, 4);
  EXPECT_EQ(DatasetReader(path).labels()[2], 1);
  build({0, 2, 1}, {"a", "b"}, 4);
  expect_user_error(path, "/images/label entry 1 is 2 (expected 0..1");
  build({0, -1, 1}, {"a", "b"}, 4);
  expect_user_error(path, "/images/label entry 1 is -1");
  build({0, 1, 1}, {"a", "b\xff"}, 4);
  expect_user_error(path, "attribute /images@class_names is not valid UTF-8");
  build({0, 1, 1}, {"a", "b"}, 3);
  expect_user_error(path, "image 0 has the size 3x5x1 in /images/{height,width,channels}, but /images/raw stores 4x5x1");
}

// A PNG cut anywhere is refused by its header check (before libpng, which would print
// to stderr); bytes after IEND do not matter.
TEST(ImagePipeline, CutPngRefusedBeforeDecoding) {
  const std::vector<uint8_t> png = png_of(12, 20, 3);
  ASSERT_TRUE(decodable_header(png.data(), png.size()));
  EXPECT_EQ(decode_rgb(png.data(), png.size()).height, 12);
  size_t accepted = 0;
  for (size_t n = 1; n < png.size(); ++n) accepted += decodable_header(png.data(), n);
  EXPECT_EQ(accepted, 0u) << "cut PNGs whose header check passed";
  std::vector<uint8_t> padded(png);
  padded.insert(padded.end(), 100, 0xAB);
  EXPECT_EQ(decode_rgb(padded.data(), padded.size()).width, 20);
}

// Every damaged byte of a PNG's chunks is refused by its CRC, and a header inflated past
// what its compressed rows can fill (its CRC made right) by the size bound, before libpng
// runs (which would print "libpng error: ..." to stderr).
TEST(ImagePipeline, DamagedOrInflatedPngRefusedBeforeDecoding) {
  const std::vector<uint8_t> png = png_of(12, 20, 3);
  size_t accepted = 0;
  for (size_t i = 8; i < png.size(); ++i) {
    std::vector<uint8_t> bad = png;
    bad[i] ^= 0x10;
    accepted += decodable_header(bad.data(), bad.size());
  }
  EXPECT_EQ(accepted, 0u) << "PNGs with a flipped byte whose check passed";
  std::vector<uint8_t> big = png;
  for (int k = 0; k < 2; ++k) {  // IHDR width and height: 7000 x 7000
    big[size_t(16 + 4 * k) + 2] = 0x1B, big[size_t(16 + 4 * k) + 3] = 0x58;
    big[size_t(16 + 4 * k)] = big[size_t(16 + 4 * k) + 1] = 0;
  }
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), big.data() + 12, 17);
  for (int k = 0; k < 4; ++k) big[size_t(29 + k)] = uint8_t(crc >> (24 - 8 * k));
  EXPECT_FALSE(decodable_header(big.data(), big.size()));
  EXPECT_TRUE(decodable_header(png.data(), png.size()));
}

TEST(H5Schema, TokenizeCaptionsWritesThenReplaces) {
  const std::string path = make_small(test::scratch_dir("schema_tokens"));
  const Tokenizer a = Tokenizer::train({"zero", "one", "uno", "two \xC3\xA9", "zero one"}, 280);
  const Tokenizer b = Tokenizer::train({"xyz xyz xyz"}, 262);
  int64_t total_b = 0;
  for (const auto& [tok, name] : {std::pair{&a, "a.json"}, std::pair{&b, "b.json"}}) {
    tokenize_captions(path, *tok, name);
    DatasetReader r(path);  // validates token_offsets against /captions/tokens
    ASSERT_TRUE(r.has_tokens());
    EXPECT_EQ(r.tokenizer_name(), name);
    int64_t total = 0;
    for (int64_t j = 0; j < r.num_captions(); ++j) {
      const std::vector<int32_t> want = tok->encode(r.caption(j), true, true);
      EXPECT_EQ(r.tokens(j), want) << name << " caption " << j;
      total += int64_t(want.size());
    }
    total_b = total;
  }
  // The second call replaced the first tokens instead of adding to them.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_EQ(test::h5_dims(f, "/captions/tokens"), (std::vector<int64_t>{total_b}));
  EXPECT_EQ(test::h5_i64(f, "/captions/token_offsets").back(), total_b);
  H5Fclose(f);
}

// Schema version 2 (data/storage/schema.h): caption boxes and caption labels written by
// DatasetWriter, read back by DatasetReader and by the HDF5 C API; the version stamped
// (1 without them, 2 with them); files of both versions read; and the reader's refusals
// of bad version-2 fields (UserError naming the file and the dataset): a box outside its
// image or upside down, a box dataset of the wrong shape, a label outside the class
// names or negative, version-2 fields in a version-1 file, a version above 2.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <opencv2/imgcodecs.hpp>

#include "base/error.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"
#include "test_util.h"

using namespace vlm;

namespace {

// Two images (20 wide x 10 high, 30 x 16), three captions; with boxes and labels when `v2`.
std::string make_file(const std::string& dir, bool v2) {
  const std::string path = dir + (v2 ? "/v2.h5" : "/v1.h5");
  DatasetWriter w = DatasetWriter::encoded(path);
  for (const auto& [h, wd] : {std::pair{10, 20}, std::pair{16, 30}}) {
    std::vector<uint8_t> png;
    cv::imencode(".png", cv::Mat(h, wd, CV_8UC3, cv::Scalar(1, 2, 3)), png);
    w.add_encoded(png.data(), png.size(), h, wd, 3);
  }
  w.add_caption(0, "a bag", "what is in the top left?");
  w.add_caption(1, "center", "where is the frog?");
  w.add_caption(1, "a frog", "what is in the center?");
  w.set_split(schema::kSplitTrain, {0, 1});
  if (v2) {
    w.set_caption_boxes({0, 0, 20, 10, 5, 3, 30, 16, 5, 3, 30, 16});
    w.set_caption_labels({8, 10, 10}, {"T-shirt", "trousers", "pullover", "dress", "coat", "sandal", "shirt",
                                       "sneaker", "bag", "ankle boot", "frog"});
  }
  w.finish();
  return path;
}

// Replaces dataset `name` by an i32 dataset of shape dims holding v.
void put_i32(hid_t file, const char* name, const std::vector<hsize_t>& dims, const std::vector<int32_t>& v) {
  if (H5Lexists(file, name, H5P_DEFAULT) > 0) H5Ldelete(file, name, H5P_DEFAULT);
  hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t d = H5Dcreate2(file, name, H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Dclose(d);
  H5Sclose(s);
}

void set_version(hid_t file, int64_t v) {
  hid_t a = H5Aopen(file, "version", H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
}

void expect_user_error(const std::string& path, const std::vector<std::string>& needles) {
  try {
    DatasetReader r(path);
    FAIL() << "no error for " << needles.back();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

}  // namespace

TEST(H5CaptionBoxes, RoundTripAndVersions) {
  const std::string dir = test::scratch_dir("caption_boxes_rt");
  const std::string v1 = make_file(dir, false), v2 = make_file(dir, true);
  {
    DatasetReader r(v1);
    EXPECT_EQ(r.version(), 1);
    EXPECT_FALSE(r.has_boxes());
    EXPECT_TRUE(r.caption_labels().empty());
    EXPECT_EQ(r.prompt(0), "what is in the top left?");
  }
  DatasetReader r(v2);
  EXPECT_EQ(r.version(), 2);
  ASSERT_TRUE(r.has_boxes());
  EXPECT_EQ(r.box(0), (CaptionBox{0, 0, 20, 10}));
  EXPECT_EQ(r.box(2), (CaptionBox{5, 3, 30, 16}));
  EXPECT_EQ(r.caption_labels(), (std::vector<int32_t>{8, 10, 10}));
  ASSERT_EQ(r.caption_class_names().size(), 11u);
  EXPECT_EQ(r.caption_class_names()[10], "frog");
  EXPECT_EQ(r.prompt(1), "where is the frog?");
  EXPECT_EQ(r.caption(1), "center");

  // The same fields through the C API: [M,4] i32 boxes, [M] labels, the class names.
  hid_t f = H5Fopen(v2.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(test::h5_int_attr(f, "version"), 2);
  EXPECT_EQ(test::h5_dims(f, "/captions/box"), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(test::h5_i32(f, "/captions/box"), (std::vector<int32_t>{0, 0, 20, 10, 5, 3, 30, 16, 5, 3, 30, 16}));
  EXPECT_EQ(test::h5_i32(f, "/captions/label"), (std::vector<int32_t>{8, 10, 10}));
  hid_t g = H5Gopen2(f, "captions", H5P_DEFAULT);
  const std::string names = test::h5_str_attr(g, "class_names");
  EXPECT_EQ(names.substr(names.size() - 15), "ankle boot\nfrog");
  H5Gclose(g);
  H5Fclose(f);
}

TEST(H5CaptionBoxes, BadBoxesRefused) {
  const std::string dir = test::scratch_dir("caption_boxes_bad");
  struct Case {
    std::vector<int32_t> box;  // caption 1's box (image 1 is 30 wide, 16 high)
    const char* what;
  };
  for (const Case& c : {Case{{5, 3, 31, 16}, "x1 past the width"}, Case{{5, 3, 30, 17}, "y1 past the height"},
                        Case{{-1, 3, 30, 16}, "negative x0"}, Case{{5, 3, 5, 16}, "empty box"},
                        Case{{9, 3, 5, 16}, "x0 > x1"}}) {
    SCOPED_TRACE(c.what);
    const std::string path = make_file(dir, true);
    std::vector<int32_t> boxes{0, 0, 20, 10, 5, 3, 30, 16, 5, 3, 30, 16};
    std::copy(c.box.begin(), c.box.end(), boxes.begin() + 4);
    test::h5_edit(path, [&](hid_t f) { put_i32(f, "/captions/box", {3, 4}, boxes); });
    expect_user_error(path, {"/captions/box", "entry 1", "inside image 1 (30 x 16"});
  }
  // Image 0 is 20 x 10: caption 0's box may not use image 1's size.
  std::string path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/box", {3, 4}, {0, 0, 30, 16, 5, 3, 30, 16, 5, 3, 30, 16}); });
  expect_user_error(path, {"/captions/box", "entry 0", "inside image 0 (20 x 10"});

  path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/box", {3, 3}, {0, 0, 1, 0, 0, 1, 0, 0, 1}); });
  expect_user_error(path, {"/captions/box", "[3,3]", "[3,4]"});
  path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/box", {2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}); });
  expect_user_error(path, {"/captions/box", "[2,4]", "[3,4]"});
}

TEST(H5CaptionBoxes, BadLabelsRefused) {
  const std::string dir = test::scratch_dir("caption_labels_bad");
  std::string path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/label", {3}, {8, 11, 10}); });
  expect_user_error(path, {"/captions/label", "entry 1 is 11", "0..10"});
  path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/label", {3}, {8, 10, -2}); });
  expect_user_error(path, {"/captions/label", "entry 2 is -2"});
  path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { put_i32(f, "/captions/label", {2}, {8, 10}); });
  expect_user_error(path, {"/captions/label", "2 entries"});
  // Without class names any label >= 0 is read.
  path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) {
    H5Adelete_by_name(f, "captions", "class_names", H5P_DEFAULT);
    put_i32(f, "/captions/label", {3}, {8, 500, 10});
  });
  EXPECT_EQ(DatasetReader(path).caption_labels()[1], 500);
}

TEST(H5CaptionBoxes, VersionsRefused) {
  const std::string dir = test::scratch_dir("caption_boxes_version");
  // Version-2 fields in a file that says version 1.
  for (const char* ds : {"/captions/box", "/captions/label"}) {
    const std::string path = make_file(dir, true);
    test::h5_edit(path, [&](hid_t f) {
      set_version(f, 1);
      H5Ldelete(f, std::string(ds) == "/captions/box" ? "/captions/label" : "/captions/box", H5P_DEFAULT);
    });
    expect_user_error(path, {ds, "needs schema version 2", "version 1"});
  }
  const std::string path = make_file(dir, true);
  test::h5_edit(path, [](hid_t f) { set_version(f, schema::kVersion + 1); });
  expect_user_error(path, {"unknown schema version 3", "versions 1 to 2"});
}

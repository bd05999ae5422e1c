// Converters on real data: 200 Fashion-MNIST images, 30 Tux Paint stamps, and a JSONL /
// LLaVA folder made here with OpenCV. Each written file is re-read with the HDF5 C API
// and compared field by field with the source bytes read independently (zlib for IDX,
// plain file reads for PNG and .txt).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "base/error.h"
#include "data/convert/converters.h"
#include "data/convert/idx.h"
#include "data/storage/dataset.h"
#include "test_util.h"
#include "tests/support/files.h"

using namespace vlm;
namespace fs = std::filesystem;

namespace {
std::string caption_at(const std::vector<uint8_t>& text, const std::vector<int64_t>& off, size_t j) {
  return std::string(text.begin() + off[j], text.begin() + off[j + 1]);
}
}  // namespace

TEST(Converters, FashionMnist200) {
  if (!test::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const std::string out = test::scratch_dir("fmnist") + "/f.h5";
  BuildOptions opt;
  opt.out = out;
  opt.limit = 200;
  opt.val_fraction = 0.1;
  opt.progress = false;
  const BuildReport rep = build_fashion_mnist(test::kFashionDir, opt);
  EXPECT_EQ(rep.images, 200);
  EXPECT_EQ(rep.captions, 200);

  // Independent read of the IDX files: 16-byte image header, 8-byte label header.
  const std::string tr = test::gunzip(std::string(test::kFashionDir) + "/train-images-idx3-ubyte.gz");
  const std::string te = test::gunzip(std::string(test::kFashionDir) + "/t10k-images-idx3-ubyte.gz");
  const std::string trl = test::gunzip(std::string(test::kFashionDir) + "/train-labels-idx1-ubyte.gz");
  const std::string tel = test::gunzip(std::string(test::kFashionDir) + "/t10k-labels-idx1-ubyte.gz");
  const int n_train = 200 - 200 / 7;  // 172 train + 28 test (the official 6:1 ratio)

  hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(test::h5_str_attr(f, "format"), "vlm-image-text");
  EXPECT_EQ(test::h5_int_attr(f, "version"), 1);
  EXPECT_EQ(test::h5_str_attr(f, "image_storage"), "raw");
  EXPECT_EQ(test::h5_dims(f, "/images/raw"), (std::vector<int64_t>{200, 28, 28, 1}));
  const auto px = test::h5_u8(f, "/images/raw");
  const auto labels = test::h5_i32(f, "/images/label");
  for (int i = 0; i < 200; ++i) {
    const bool is_tr = i < n_train;
    const std::string& src = is_tr ? tr : te;
    const size_t k = size_t(is_tr ? i : i - n_train);
    ASSERT_EQ(0, std::memcmp(px.data() + size_t(i) * 784, src.data() + 16 + k * 784, 784)) << "image " << i;
    ASSERT_EQ(labels[size_t(i)], int((is_tr ? trl : tel)[8 + k])) << "label " << i;
  }
  const auto text = test::h5_u8(f, "/captions/text");
  const auto off = test::h5_i64(f, "/captions/text_offsets");
  const auto cap_img = test::h5_i64(f, "/captions/image");
  const char* nouns[10] = {"T-shirt", "trousers", "pullover", "dress", "coat",
                           "sandal", "shirt", "sneaker", "bag", "ankle boot"};
  std::set<std::string> phrasings;
  for (size_t j = 0; j < 200; ++j) {
    EXPECT_EQ(cap_img[j], int64_t(j));
    std::string c = caption_at(text, off, j);
    std::string lc = c;
    std::transform(lc.begin(), lc.end(), lc.begin(), ::tolower);
    std::string noun = nouns[labels[j]];
    std::transform(noun.begin(), noun.end(), noun.begin(), ::tolower);
    EXPECT_NE(lc.find(noun), std::string::npos) << c;
    phrasings.insert(c.substr(0, 6));
  }
  EXPECT_GE(phrasings.size(), 4u);  // several phrasings
  // Splits: test = the official test images; train and val partition the train images.
  const auto train = test::h5_i64(f, "/splits/train"), val = test::h5_i64(f, "/splits/val"),
             tst = test::h5_i64(f, "/splits/test");
  EXPECT_EQ(val.size(), size_t(n_train / 10));
  std::vector<int64_t> all = train;
  all.insert(all.end(), val.begin(), val.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < n_train; ++i) ASSERT_EQ(all[size_t(i)], i);
  ASSERT_EQ(all.size(), size_t(n_train));
  for (size_t k = 0; k < tst.size(); ++k) EXPECT_EQ(tst[k], int64_t(n_train + int(k)));
  EXPECT_EQ(tst.size(), size_t(200 - n_train));
  H5Fclose(f);
  DatasetReader r(out);  // and the reader accepts it
  EXPECT_EQ(r.class_names().size(), 10u);
  EXPECT_EQ(r.class_names()[9], "Ankle boot");
}

// An IDX file read plain, gzipped, and gzipped in two members (`cat a.gz b.gz`, which
// gzip reads as one stream): the same dims and bytes.
TEST(Converters, IdxPlainGzipAndTwoGzipMembersReadAlike) {
  const std::string dir = test::scratch_dir("idx_members");
  std::string bytes{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0, 7};
  for (int i = 0; i < 3 * 5 * 7; ++i) bytes += char(i * 37 % 256);
  test::write_file(dir + "/plain", bytes);
  test::write_file(dir + "/one.gz", test::gzip(bytes));
  test::write_file(dir + "/two.gz", test::gzip(bytes.substr(0, 21)) + test::gzip(bytes.substr(21)));
  for (const char* f : {"plain", "one.gz", "two.gz"}) {
    const IdxArray a = read_idx(dir + "/" + f);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 5, 7})) << f;
    EXPECT_EQ(std::string(a.data.begin(), a.data.end()), bytes.substr(16)) << f;
  }
  const IdxArray cut = read_idx(dir + "/two.gz", 2);
  EXPECT_EQ(cut.dims, (std::vector<int64_t>{2, 5, 7}));
  EXPECT_EQ(std::string(cut.data.begin(), cut.data.end()), bytes.substr(16, 70));
  fs::remove_all(dir);
}

TEST(Converters, TuxPaint30) {
  if (!test::have_tuxpaint()) GTEST_SKIP() << "tuxpaint-stamps-default not installed";
  const std::string out = test::scratch_dir("tux") + "/t.h5";
  BuildOptions opt;
  opt.out = out;
  opt.limit = 30;
  opt.progress = false;
  const BuildReport rep = build_tuxpaint(test::kTuxDir, opt);

  // Expected: the first 30 PNGs (sorted paths) that have a .txt with a non-empty first line.
  std::vector<std::string> pngs;
  for (const auto& e : fs::recursive_directory_iterator(test::kTuxDir))
    if (e.path().extension() == ".png") pngs.push_back(e.path().string());
  std::sort(pngs.begin(), pngs.end());
  std::vector<std::pair<std::string, std::string>> want;
  for (const auto& p : pngs) {
    const std::string txt = fs::path(p).replace_extension(".txt").string();
    if (!fs::exists(txt)) continue;
    std::string first = test::read_file(txt);
    first = first.substr(0, first.find('\n'));
    while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
    if (first.empty()) continue;
    want.emplace_back(p, first);
    if (want.size() == 30) break;
  }
  ASSERT_EQ(rep.images, 30);
  hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(test::h5_str_attr(f, "image_storage"), "encoded");
  const auto bytes = test::h5_u8(f, "/images/encoded");
  const auto ioff = test::h5_i64(f, "/images/offsets");
  const auto text = test::h5_u8(f, "/captions/text");
  const auto toff = test::h5_i64(f, "/captions/text_offsets");
  const auto hs = test::h5_i32(f, "/images/height"), ws = test::h5_i32(f, "/images/width");
  for (size_t i = 0; i < 30; ++i) {
    const std::string src = test::read_file(want[i].first);
    ASSERT_EQ(std::string(bytes.begin() + ioff[i], bytes.begin() + ioff[i + 1]), src) << want[i].first;
    EXPECT_EQ(caption_at(text, toff, i), want[i].second);
    const cv::Mat m = cv::imread(want[i].first, cv::IMREAD_UNCHANGED);
    EXPECT_EQ(hs[i], m.rows);
    EXPECT_EQ(ws[i], m.cols);
  }
  H5Fclose(f);
  DatasetReader r(out);
  EXPECT_EQ(r.split("train").size() + r.split("val").size() + r.split("test").size(), 30u);
}

TEST(Converters, JsonlAndLlavaFolder) {
  const std::string dir = test::scratch_dir("jsonl");
  fs::create_directories(dir + "/img/sub");
  std::vector<std::string> files = {"img/a.png", "img/b.png", "img/sub/c.png", "img/bad.png"};
  for (int i = 0; i < 3; ++i) {
    cv::Mat m(20 + i, 30, CV_8UC3, cv::Scalar(10 * i, 50, 200));
    cv::imwrite(dir + "/" + files[size_t(i)], m);
  }
  const std::string good = test::read_file(dir + "/img/a.png");
  test::write_file(dir + "/img/bad.png", good.substr(0, good.size() / 2));  // truncated PNG
  test::write_file(dir + "/caps.jsonl",
                   "{\"image\": \"img/a.png\", \"caption\": \"a blue \\\"square\\\"\"}\n"
                   "\n"
                   "{\"image\": \"img/b.png\", \"captions\": [\"b one\", \"b two\"]}\n"
                   "{\"image\": \"img/missing.png\", \"caption\": \"gone\"}\n"
                   "{\"image\": \"img/bad.png\", \"caption\": \"broken\"}\n"
                   "{\"image\": \"img/sub/c.png\", \"caption\": \"caf\\u00e9\", \"prompt\": \"Describe.\"}\n"
                   "{\"image\": \"img/a.png\", \"caption\": \"again a\"}\n");
  BuildOptions opt;
  opt.out = dir + "/j.h5";
  opt.progress = false;
  opt.max_bad_images = 0.5;  // 2 of the 5 images are bad on purpose (default 0.1 refuses: tests/robustness)
  const BuildReport rep = build_from_jsonl(dir + "/caps.jsonl", dir, opt);
  EXPECT_EQ(rep.images, 3);
  EXPECT_EQ(rep.captions, 5);
  EXPECT_EQ(rep.skipped, 2);  // missing + truncated

  hid_t f = H5Fopen(opt.out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const auto text = test::h5_u8(f, "/captions/text");
  const auto toff = test::h5_i64(f, "/captions/text_offsets");
  const std::vector<std::string> caps = {"a blue \"square\"", "b one", "b two", "caf\xC3\xA9", "again a"};
  for (size_t j = 0; j < caps.size(); ++j) EXPECT_EQ(caption_at(text, toff, j), caps[j]);
  EXPECT_EQ(test::h5_i64(f, "/captions/image"), (std::vector<int64_t>{0, 1, 1, 2, 0}));
  const auto ptext = test::h5_u8(f, "/captions/prompt");
  const auto poff = test::h5_i64(f, "/captions/prompt_offsets");
  EXPECT_EQ(caption_at(ptext, poff, 3), "Describe.");
  EXPECT_EQ(caption_at(ptext, poff, 0), "");
  const auto bytes = test::h5_u8(f, "/images/encoded");
  const auto ioff = test::h5_i64(f, "/images/offsets");
  EXPECT_EQ(std::string(bytes.begin() + ioff[2], bytes.begin() + ioff[3]), test::read_file(dir + "/img/sub/c.png"));
  EXPECT_EQ(test::h5_i32(f, "/images/height"), (std::vector<int32_t>{20, 21, 22}));
  H5Fclose(f);

  // LLaVA-style: gpt turns are captions, the preceding human turn (minus <image>) the prompt.
  test::write_file(dir + "/llava.json", R"([
    {"id": "1", "image": "img/a.png", "conversations": [
      {"from": "human", "value": "<image>\nWhat colour is it?"}, {"from": "gpt", "value": "Blue."},
      {"from": "human", "value": "And the shape?"}, {"from": "gpt", "value": "A square."}]},
    {"id": "2", "conversations": [{"from": "human", "value": "text only"}, {"from": "gpt", "value": "x"}]},
    {"id": "3", "image": "img/b.png", "conversations": [{"from": "gpt", "value": "Something."}]}
  ])");
  opt.out = dir + "/l.h5";
  const BuildReport rl = build_from_llava(dir + "/llava.json", dir, opt);
  EXPECT_EQ(rl.images, 2);
  EXPECT_EQ(rl.captions, 3);
  EXPECT_EQ(rl.skipped, 1);
  DatasetReader r(opt.out);
  EXPECT_EQ(r.caption(1), "A square.");
  EXPECT_EQ(r.prompt(0), "What colour is it?");
  EXPECT_EQ(r.prompt(1), "And the shape?");
  EXPECT_EQ(r.caption_image(2), 1);

  // Bad JSON names the file and line.
  test::write_file(dir + "/bad.jsonl", "{\"image\": \"img/a.png\", \"caption\": \"ok\"}\n{\"image\": oops}\n");
  opt.out = dir + "/bad.h5";
  try {
    build_from_jsonl(dir + "/bad.jsonl", dir, opt);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
}

// Converters for the two public datasets shipped as Debian packages:
//  - Fashion-MNIST (dataset-fashion-mnist): raw [N,28,28,1] storage, labels and class
//    names kept, one caption per image from the class name in one of several phrasings
//    (chosen by image index), official train/test split kept, val carved from train by
//    the seeded permutation. Images 0..n_train-1 come from train, then the test images.
//    With --data.limit L: L - L/7 train images and L/7 test images (the official ratio).
//  - Tux Paint stamps (tuxpaint-stamps-default): every *.png with a sibling .txt, in
//    sorted path order; caption = first line of the .txt (English), trimmed.
// Policies (bad images, text errors): converters.h.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/file_read.h"
#include "data/convert/converters.h"
#include "data/convert/idx.h"
#include "data/load/sampler.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"

namespace vlm {

namespace fs = std::filesystem;

const std::vector<std::string>& fashion_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

// Noun phrases used in captions (with their article).
static const char* kFashionNouns[10] = {"a T-shirt", "a pair of trousers", "a pullover", "a dress", "a coat",
                                        "a sandal", "a shirt", "a sneaker", "a bag", "an ankle boot"};
static const char* kPhrasings[6] = {"{}.", "A photo of {}.", "A grayscale picture of {}.",
                                    "This is {}.", "A small image showing {}.", "{} on a dark background."};

std::string fashion_caption(int label, int64_t image) {
  std::string p = kPhrasings[size_t(image % 6)];
  std::string noun = kFashionNouns[label];
  if (p.rfind("{}", 0) == 0) noun[0] = char(std::toupper(static_cast<unsigned char>(noun[0])));
  p.replace(p.find("{}"), 2, noun);
  return p;
}

static std::string find_idx(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    const std::string p = dir + "/" + stem + ext;
    if (fs::exists(p)) return p;
  }
  throw UserError(cat(dir, ": missing ", stem, "[.gz] (is dataset-fashion-mnist installed?)"));
}

FashionMnist read_fashion_mnist(const std::string& dir, int64_t max_train, int64_t max_test) {
  FashionMnist fm;
  fm.train_images_path = find_idx(dir, "train-images-idx3-ubyte");
  fm.train_labels_path = find_idx(dir, "train-labels-idx1-ubyte");
  fm.train_images = read_idx(fm.train_images_path, max_train);
  fm.train_labels = read_idx(fm.train_labels_path, max_train);
  if (max_test >= 0) {
    fm.test_images_path = find_idx(dir, "t10k-images-idx3-ubyte");
    fm.test_labels_path = find_idx(dir, "t10k-labels-idx1-ubyte");
    fm.test_images = read_idx(fm.test_images_path, max_test);
    fm.test_labels = read_idx(fm.test_labels_path, max_test);
  } else {
    fm.test_images.dims = {0, 28, 28};
    fm.test_labels.dims = {0};
  }
  for (const auto& [a, p] : {std::pair{&fm.train_images, &fm.train_images_path},
                             std::pair{&fm.test_images, &fm.test_images_path}})
    VLM_REQUIRE(a->dims.size() == 3 && a->dims[1] == 28 && a->dims[2] == 28, *p,
                ": Fashion-MNIST images must be N x 28 x 28 (this IDX file holds ", a->dims.size(), " dimensions)");
  for (const auto& [a, p] : {std::pair{&fm.train_labels, &fm.train_labels_path},
                             std::pair{&fm.test_labels, &fm.test_labels_path}})
    VLM_REQUIRE(a->dims.size() == 1, *p, ": Fashion-MNIST labels must be a 1-D IDX file (this one holds ",
                a->dims.size(), " dimensions)");
  VLM_REQUIRE(fm.train_images.dims[0] == fm.train_labels.dims[0], fm.train_labels_path, ": ",
              fm.train_labels.dims[0], " labels for the ", fm.train_images.dims[0], " images of ",
              fm.train_images_path);
  VLM_REQUIRE(fm.test_images.dims[0] == fm.test_labels.dims[0], fm.test_labels_path, ": ", fm.test_labels.dims[0],
              " labels for the ", fm.test_images.dims[0], " images of ", fm.test_images_path);
  for (const auto& [a, p] : {std::pair{&fm.train_labels, &fm.train_labels_path},
                             std::pair{&fm.test_labels, &fm.test_labels_path}})
    for (size_t k = 0; k < a->data.size(); ++k)
      VLM_REQUIRE(a->data[k] < 10, *p, ": label ", k, " is ", int(a->data[k]), " (Fashion-MNIST labels are 0..9)");
  return fm;
}

BuildReport build_fashion_mnist(const std::string& dir, const BuildOptions& opt) {
  const int64_t want_train = opt.limit > 0 ? opt.limit - opt.limit / 7 : 0;
  const int64_t want_test = opt.limit > 0 ? opt.limit / 7 : 0;
  const FashionMnist fm = read_fashion_mnist(dir, want_train, opt.limit == 0 || want_test > 0 ? want_test : -1);
  DatasetWriter w = DatasetWriter::raw(opt.out, 28, 28, 1);
  w.set_source("fashion-mnist:" + dir);
  w.set_tokenizer(opt.tokenizer_name);
  std::vector<int32_t> labels;
  const int64_t n_train = fm.train_images.dims[0], n_test = fm.test_images.dims[0], n = n_train + n_test;
  for (int64_t i = 0; i < n; ++i) {
    const bool tr = i < n_train;
    const int64_t k = tr ? i : i - n_train;
    const uint8_t* px = (tr ? fm.train_images : fm.test_images).data.data() + k * 784;
    const int label = (tr ? fm.train_labels : fm.test_labels).data[size_t(k)];
    w.add_raw(px);
    add_caption_checked(w, i, fashion_caption(label, i), "",
                        cat(tr ? fm.train_labels_path : fm.test_labels_path, ": label ", k), opt);
    labels.push_back(label);
    build_progress(opt, "fashion-mnist images", i + 1, n);
  }
  w.set_labels(labels, fashion_class_names());
  // Official split: test = the t10k images; val = val_fraction of train (seeded).
  std::vector<int64_t> train, val, test;
  const std::vector<int64_t> p = DistributedSampler::permutation(std::max<int64_t>(n_train, 1), opt.seed, -1);
  const int64_t nv = int64_t(double(n_train) * opt.val_fraction);
  for (int64_t k = 0; k < n_train; ++k) (k < nv ? val : train).push_back(p[size_t(k)]);
  for (int64_t i = n_train; i < n; ++i) test.push_back(i);
  w.set_split(schema::kSplitTrain, std::move(train));
  w.set_split(schema::kSplitVal, std::move(val));
  w.set_split(schema::kSplitTest, std::move(test));
  w.finish();
  return {n, n, 0};
}

BuildReport build_tuxpaint(const std::string& dir, const BuildOptions& opt) {
  // Stamp descriptions are a line or a few translations; a bigger .txt is not one.
  constexpr uint64_t kMaxDescriptionBytes = uint64_t(1) << 20;
  VLM_REQUIRE(fs::is_directory(dir), dir, ": not a directory (is tuxpaint-stamps-default installed?)");
  std::vector<std::pair<std::string, std::string>> stamps;  // png, caption
  int64_t no_text = 0;
  std::vector<std::string> pngs;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".png") pngs.push_back(e.path().string());
  std::sort(pngs.begin(), pngs.end());
  for (const std::string& png : pngs) {
    const std::string txt = fs::path(png).replace_extension(".txt").string();
    std::string line;
    if (fs::exists(txt)) {
      const std::string t = read_file_bounded(txt, kMaxDescriptionBytes, "stamp description");
      line = t.substr(0, t.find('\n'));
      const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
      line = b == std::string::npos ? "" : line.substr(b, e - b + 1);
    }
    if (line.empty()) {
      ++no_text;
      continue;
    }
    stamps.emplace_back(png, line);
    if (opt.limit > 0 && int64_t(stamps.size()) >= opt.limit) break;
  }
  BuildReport rep;
  rep.skipped = no_text;
  if (no_text > 0)
    std::printf("[build] %s: %lld stamps without a description skipped\n", dir.c_str(),
                 (long long)no_text);
  VLM_REQUIRE(!stamps.empty(), dir, ": no stamps (*.png with a .txt description) found; nothing written");
  DatasetWriter w = DatasetWriter::encoded(opt.out);
  w.set_source("tuxpaint-stamps:" + dir);
  w.set_tokenizer(opt.tokenizer_name);
  for (size_t k = 0; k < stamps.size(); ++k) {
    int64_t idx;
    const std::string txt = fs::path(stamps[k].first).replace_extension(".txt").string();
    if (add_encoded_file(w, stamps[k].first, &idx)) add_caption_checked(w, idx, stamps[k].second, "", txt, opt);
    else ++rep.skipped, ++rep.bad;
    build_progress(opt, "tuxpaint stamps", int64_t(k) + 1, int64_t(stamps.size()));
  }
  require_usable_images(dir, int64_t(stamps.size()), rep.bad, opt);
  rep.images = w.num_images();
  rep.captions = w.num_captions();
  write_random_splits(w, rep.images, opt);
  w.finish();
  return rep;
}

}  // namespace vlm

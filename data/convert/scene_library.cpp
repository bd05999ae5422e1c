// Implementation of SceneLibrary (see scene_library.h).
#include "data/convert/scene_library.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "base/error.h"
#include "base/file_read.h"
#include "data/convert/converters.h"
#include "data/load/sampler.h"
#include "data/storage/schema.h"

namespace vlm {

namespace fs = std::filesystem;

namespace {

// Scene names of the Fashion-MNIST labels 0..9.
const SceneClass kFashionScene[10] = {
    {"T-shirt", "a T-shirt", false}, {"trousers", "a pair of trousers", true}, {"pullover", "a pullover", false},
    {"dress", "a dress", false},     {"coat", "a coat", false},                {"sandal", "a sandal", false},
    {"shirt", "a shirt", false},     {"sneaker", "a sneaker", false},          {"bag", "a bag", false},
    {"ankle boot", "an ankle boot", false}};

bool word_ok(const std::string& w) {
  if (w.empty() || !std::isalpha(static_cast<unsigned char>(w[0]))) return false;
  for (char c : w)
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '-' && c != '\'') return false;
  return true;
}

// "A frog." -> ("a", "frog"); false unless the line is an article and 1-3 plain words.
bool noun_phrase(std::string line, std::string* article, std::string* name) {
  while (!line.empty() && (line.back() == '.' || std::isspace(static_cast<unsigned char>(line.back()))))
    line.pop_back();
  std::vector<std::string> words;
  size_t at = 0;
  while (at <= line.size()) {
    const size_t sp = std::min(line.find(' ', at), line.size());
    words.push_back(line.substr(at, sp - at));
    at = sp + 1;
  }
  if (words.size() < 2 || words.size() > 4 || (words[0] != "A" && words[0] != "An")) return false;
  for (size_t k = 1; k < words.size(); ++k)
    if (!word_ok(words[k])) return false;
  *article = words[0] == "A" ? "a" : "an";
  name->clear();
  for (size_t k = 1; k < words.size(); ++k) *name += (k > 1 ? " " : "") + words[k];
  return true;
}

}  // namespace

SceneLibrary::SceneLibrary(const std::string& fashion_dir, const std::string& stamps_dir, double val_fraction,
                           uint64_t seed, int max_side)
    : max_side_(max_side) {
  VLM_ASSERT(max_side > 0 && val_fraction >= 0 && val_fraction < 1, "SceneLibrary(max_side ", max_side, ")");
  FashionMnist fm = read_fashion_mnist(fashion_dir, 0, 0);
  const int64_t n_train = fm.train_images.dims[0], n_test = fm.test_images.dims[0];
  VLM_REQUIRE(n_train > 0 && n_test > 0, fashion_dir, ": Fashion-MNIST has ", n_train, " train and ", n_test,
              " test images (the scenes need both)");
  fm_pixels_ = std::move(fm.train_images.data);
  fm_pixels_.insert(fm_pixels_.end(), fm.test_images.data.begin(), fm.test_images.data.end());
  fm_labels_ = std::move(fm.train_labels.data);
  fm_labels_.insert(fm_labels_.end(), fm.test_labels.data.begin(), fm.test_labels.data.end());
  const std::vector<int64_t> perm = DistributedSampler::permutation(n_train, seed, -1);
  const int64_t n_val = int64_t(double(n_train) * val_fraction);
  for (int64_t k = 0; k < n_train; ++k) pools_[k < n_val ? 1 : 0].push_back(perm[size_t(k)]);
  for (auto& p : pools_) std::sort(p.begin(), p.end());
  for (int64_t i = n_train; i < n_train + n_test; ++i) pools_[2].push_back(i);
  classes_.assign(kFashionScene, kFashionScene + 10);
  if (stamps_dir.empty()) return;

  // Stamps: a short noun phrase as the first line of their description.
  constexpr uint64_t kMaxDescriptionBytes = uint64_t(1) << 20;  // as the tuxpaint converter
  VLM_REQUIRE(fs::is_directory(stamps_dir), stamps_dir, ": not a directory (is tuxpaint-stamps-default installed?)");
  std::vector<std::string> pngs;
  for (const auto& e : fs::recursive_directory_iterator(stamps_dir))
    if (e.is_regular_file() && e.path().extension() == ".png") pngs.push_back(e.path().string());
  std::sort(pngs.begin(), pngs.end());
  std::map<std::string, std::string> a_noun;  // name -> "a name"
  std::vector<std::pair<std::string, std::string>> found;  // png, name
  for (const std::string& png : pngs) {
    const std::string txt = fs::path(png).replace_extension(".txt").string();
    if (!fs::is_regular_file(txt)) continue;
    const std::string t = read_file_bounded(txt, kMaxDescriptionBytes, "stamp description");
    std::string article, name;
    if (!noun_phrase(t.substr(0, t.find_first_of("\r\n")), &article, &name)) continue;
    a_noun.emplace(name, article + " " + name);
    found.emplace_back(png, name);
  }
  VLM_REQUIRE(!found.empty(), stamps_dir, ": no stamp (*.png with a .txt description \"A <noun>.\") found ",
              "(--data.stamp_fraction 0 makes scenes without stamps)");
  std::map<std::string, int> id;
  for (int c = 0; c < 10; ++c) id[classes_[size_t(c)].name] = c;
  for (const auto& [name, a] : a_noun)  // map order: classes 10.. sorted by name
    if (id.emplace(name, int(classes_.size())).second) classes_.push_back({name, a, false});
  for (const auto& [png, name] : found) stamps_.push_back({png, id.at(name), false, {}});
}

std::vector<std::string> SceneLibrary::class_names() const {
  std::vector<std::string> v;
  for (const SceneClass& c : classes_) v.push_back(c.name);
  return v;
}

SceneItemRef SceneLibrary::draw(ScenePool pool, double stamp_fraction, SceneRng& rng) const {
  const std::vector<int64_t>& p = pools_[int(pool)];
  VLM_ASSERT(!p.empty(), "SceneLibrary::draw from an empty pool");
  if (!stamps_.empty() && rng.unit() < stamp_fraction) return {true, rng.range(0, int64_t(stamps_.size()) - 1)};
  return {false, p[size_t(rng.range(0, int64_t(p.size()) - 1))]};
}

int SceneLibrary::class_of(const SceneItemRef& item) const {
  return item.stamp ? stamps_[size_t(item.index)].class_id : int(fm_labels_[size_t(item.index)]);
}

const SceneLibrary::Stamp& SceneLibrary::stamp(int64_t i) {
  Stamp& s = stamps_[size_t(i)];
  if (s.loaded) return s;
  s.loaded = true;
  std::string bytes;
  try {
    bytes = read_file_bounded(s.png, uint64_t(schema::kMaxImageBytes), "stamp image");
  } catch (const UserError& e) {
    std::printf("[build] warning: %s; stamp not used\n", e.what());
    return s;
  }
  Sprite sp;
  {
    QuietStderr quiet;
    sp = decode_sprite(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  if (sp.empty()) {
    std::printf("[build] warning: %s: cannot decode as a PNG image; stamp not used\n", s.png.c_str());
    return s;
  }
  const int longer = std::max(sp.height, sp.width);
  if (longer > max_side_) {
    const double f = double(max_side_) / longer;
    sp = resize_sprite(sp, std::max(1, int(sp.height * f + 0.5)), std::max(1, int(sp.width * f + 0.5)));
  }
  s.sprite = std::move(sp);
  return s;
}

Sprite SceneLibrary::render(const SceneItemRef& item, int side, const uint8_t tint[3]) {
  VLM_ASSERT(side > 0, "SceneLibrary::render side ", side);
  if (!item.stamp) {
    const Sprite s = sprite_from_grey(fm_pixels_.data() + size_t(item.index) * 784, 28, 28, tint);
    return resize_sprite(s, side, side);
  }
  const Sprite& s = stamp(item.index).sprite;
  if (s.empty()) return {};
  const double f = double(side) / std::max(s.height, s.width);
  return resize_sprite(s, std::max(1, int(s.height * f + 0.5)), std::max(1, int(s.width * f + 0.5)));
}

}  // namespace vlm

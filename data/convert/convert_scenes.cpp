// The scenes converter (converters.h build_scenes; docs/dataset-format.md, "Scenes"):
// scenes of Fashion-MNIST items and Tux Paint stamps (scene_library.h) laid out by
// compose_scene (scene_compose.h), each asked about in questions whose answer needs the
// right place of the picture:
//  - per item, "what is in the <region>?" -> "<a noun>" ("a sneaker"), in one of
//    kWhat's phrasings (the region is the item's, region_of; no two items share one);
//  - per item whose class is alone in its scene, "where is the <class>?" -> "<region>"
//    ("bottom right"), in one of kWhere's phrasings ("are" for plural class names).
// Every question is a caption (prompt = question, text = answer) with the item's box and
// class (schema version 2). Scenes are stored as PNG; scene i is drawn from
// SceneRng(seed, i), its split from random_splits, so a seed gives a byte-identical file.
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/convert/converters.h"
#include "data/convert/scene_compose.h"
#include "data/image/png.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"

namespace vlm {

namespace {

// "{}" stands for the region or the class; the question always ends "the {}?".
const char* const kWhat[] = {"what is in the {}?", "what is at the {}?", "which object is in the {}?"};
const char* const kWhere[] = {"where is the {}?", "in which part of the picture is the {}?"};

std::string fill(std::string pattern, const std::string& what, bool plural) {
  if (plural) {
    const size_t is = pattern.find(" is ");
    if (is != std::string::npos) pattern.replace(is, 4, " are ");
  }
  return pattern.replace(pattern.find("{}"), 2, what);
}

struct Question {
  std::string prompt, answer;
  size_t item;
};

std::vector<Question> questions(const Scene& s, const std::vector<SceneClass>& classes, SceneRng& rng) {
  std::vector<int> count(classes.size(), 0);
  for (const SceneItem& it : s.items) ++count[size_t(it.class_id)];
  std::vector<Question> q;
  for (size_t k = 0; k < s.items.size(); ++k) {
    const SceneItem& it = s.items[k];
    const SceneClass& c = classes[size_t(it.class_id)];
    const std::string region = kSceneRegionNames[it.region];
    q.push_back({fill(kWhat[rng.range(0, int64_t(std::size(kWhat)) - 1)], region, false), c.a_noun, k});
    if (count[size_t(it.class_id)] == 1)
      q.push_back({fill(kWhere[rng.range(0, int64_t(std::size(kWhere)) - 1)], c.name, c.plural), region, k});
  }
  return q;
}

}  // namespace

BuildReport build_scenes(const SceneOptions& sc, const BuildOptions& opt) {
  VLM_REQUIRE(opt.limit >= 1, "--data.limit: the scenes converter makes --data.limit scenes (expected >= 1, got ",
              opt.limit, ")");
  VLM_REQUIRE(sc.size >= kMinSceneSize && sc.size <= kMaxSceneSize, "--data.scene_size: ", sc.size, " (expected ",
              kMinSceneSize, "..", kMaxSceneSize, " pixels)");
  VLM_REQUIRE(sc.stamp_fraction >= 0 && sc.stamp_fraction <= 1, "--data.stamp_fraction: ", sc.stamp_fraction,
              " (expected 0..1)");
  const int64_t n = opt.limit;
  const Splits splits = random_splits(n, opt);
  std::vector<ScenePool> pool(size_t(n), ScenePool::Train);
  for (int64_t i : splits.val) pool[size_t(i)] = ScenePool::Val;
  for (int64_t i : splits.test) pool[size_t(i)] = ScenePool::Test;
  // Items are drawn at most 0.95 x size / 3 pixels (scene_compose.h).
  SceneLibrary lib(sc.fashion_dir, sc.stamp_fraction > 0 ? sc.stamps_dir : "", opt.val_fraction, opt.seed,
                   int(std::ceil(0.95 * sc.size / 3.0)));
  VLM_REQUIRE(splits.val.empty() || !lib.pool_empty(ScenePool::Val), "--data.val_fraction: ", opt.val_fraction,
              " gives ", splits.val.size(), " val scenes but no Fashion-MNIST picture of their own (",
              "val scenes use val_fraction of the train pictures)");

  DatasetWriter w = DatasetWriter::encoded(opt.out);
  w.set_source(cat("scenes: size ", sc.size, ", seed ", opt.seed, ", stamp_fraction ", sc.stamp_fraction,
                   ", fashion-mnist ", sc.fashion_dir, sc.stamp_fraction > 0 ? ", stamps " + sc.stamps_dir : ""));
  w.set_tokenizer(opt.tokenizer_name);
  std::vector<int32_t> boxes, labels;
  for (int64_t i = 0; i < n; ++i) {
    SceneRng rng(opt.seed, uint64_t(i));
    const Scene s = compose_scene(lib, pool[size_t(i)], sc.size, sc.stamp_fraction, rng);
    const std::string png = encode_png(s.rgb.data(), sc.size, sc.size, 3);
    const int64_t image =
        w.add_encoded(reinterpret_cast<const uint8_t*>(png.data()), png.size(), sc.size, sc.size, 3);
    for (const Question& q : questions(s, lib.classes(), rng)) {
      const SceneItem& it = s.items[q.item];
      add_caption_checked(w, image, q.answer, q.prompt, cat("scene ", i), opt);
      boxes.insert(boxes.end(), {it.box.x0, it.box.y0, it.box.x1, it.box.y1});
      labels.push_back(it.class_id);
    }
    build_progress(opt, "scenes", i + 1, n);
  }
  return finish_labelled_build(w, std::move(boxes), std::move(labels), lib.class_names(), splits);
}

}  // namespace vlm

// The colour-scenes converter (converters.h build_colour_scenes; docs/dataset-format.md,
// "Colour scenes"): scenes of digits or Fashion-MNIST items in distinct named colours on
// grey clutter (colour_compose.h), each item asked about once: "what is the <colour>
// item?" (or "which item is <colour>?") -> its class noun ("a seven", "a sneaker"), or
// with ColourQuestion::ColourLast "which item is <colour>" -> its class name ("seven",
// "sneaker"), the scenes unchanged. The colour survives pooling, so the place is
// findable at coarse detail; the class needs the item at full detail. Every question is
// a caption (prompt = question, text = answer) with the item's box and class (schema
// version 2), as the scenes converter stores them. Scenes are PNG; scene i is drawn from
// SceneRng(seed, i), its split from random_splits, so a seed gives a byte-identical file.
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"
#include "data/image/png.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"

namespace vlm {

namespace {

// "{}" stands for the colour name.
const char* const kAsk[] = {"what is the {} item?", "which item is {}?"};

}  // namespace

BuildReport build_colour_scenes(const ColourSceneOptions& sc, const BuildOptions& opt) {
  VLM_REQUIRE(opt.limit >= 1, "--data.limit: the colours converter makes --data.limit scenes (expected >= 1, got ",
              opt.limit, ")");
  VLM_REQUIRE(sc.grid >= 1 && sc.grid <= 64, "--data.colour_grid: ", sc.grid, " (expected 1..64 slots per side)");
  VLM_REQUIRE(sc.size % sc.grid == 0 && sc.size / sc.grid >= kColourMinSlot && sc.size <= kMaxSceneSize,
              "--data.scene_size: ", sc.size, " (the colours converter needs a multiple of --data.colour_grid = ",
              sc.grid, " with slots of at least ", kColourMinSlot, " pixels, at most ", kMaxSceneSize, ")");
  const int most = std::min(kColourPaletteSize, sc.grid * sc.grid);
  VLM_REQUIRE(sc.max_items >= kColourMinItems && sc.max_items <= most, "--data.colour_items: ", sc.max_items,
              " (expected ", kColourMinItems, "..", most, ": one palette colour and one slot per item)");
  VLM_REQUIRE(sc.min_items >= kColourMinItems && sc.min_items <= sc.max_items, "--data.colour_min_items: ",
              sc.min_items, " (expected ", kColourMinItems, "..", sc.max_items, ", at most --data.colour_items)");
  const int K = sc.block_items;
  VLM_REQUIRE(K == 0 || (K >= 2 && K <= 4), "--data.colour_block_items: ", K, " (expected 0, or 2..4 items per block)");
  VLM_REQUIRE(K == 0 || sc.grid % 2 == 0, "--data.colour_block_items: ", K, " needs blocks of 2 x 2 slots, an even ",
              "--data.colour_grid (got ", sc.grid, ")");
  VLM_REQUIRE(K == 0 || (sc.min_items % K == 0 && sc.max_items % K == 0), "--data.colour_block_items: ", K,
              " needs --data.colour_min_items and --data.colour_items multiples of it (got ", sc.min_items, " and ",
              sc.max_items, ")");
  VLM_REQUIRE(K == 0 || sc.max_items / K <= (sc.grid / 2) * (sc.grid / 2), "--data.colour_items: ", sc.max_items,
              " items ", K, " to a block need ", sc.max_items / K, " blocks of 2 x 2 slots; the grid has ",
              (sc.grid / 2) * (sc.grid / 2));
  const int64_t n = opt.limit;
  const Splits splits = random_splits(n, opt);
  std::vector<ScenePool> pool(size_t(n), ScenePool::Train);
  for (int64_t i : splits.val) pool[size_t(i)] = ScenePool::Val;
  for (int64_t i : splits.test) pool[size_t(i)] = ScenePool::Test;
  const bool fashion = sc.classes == ColourClasses::Fashion;
  std::unique_ptr<SceneLibrary> lib;
  if (fashion) {
    lib = std::make_unique<SceneLibrary>(sc.fashion_dir, "", opt.val_fraction, opt.seed, sc.size / sc.grid);
    VLM_REQUIRE(splits.val.empty() || !lib->pool_empty(ScenePool::Val), "--data.val_fraction: ", opt.val_fraction,
                " gives ", splits.val.size(), " val scenes but no Fashion-MNIST picture of their own (",
                "val scenes use val_fraction of the train pictures)");
  }
  const std::vector<SceneClass>& classes = fashion ? lib->classes() : digit_classes();
  std::vector<std::string> names;
  for (const SceneClass& c : classes) names.push_back(c.name);

  DatasetWriter w = DatasetWriter::encoded(opt.out);
  w.set_source(cat("colours: size ", sc.size, ", grid ", sc.grid, ", items ", sc.min_items, "..", sc.max_items,
                   K ? cat(" (", K, " per block of 2 x 2 slots)") : std::string(),
                   sc.question == ColourQuestion::ColourLast ? ", colour-last questions" : "", ", seed ", opt.seed,
                   fashion ? ", fashion-mnist " + sc.fashion_dir : std::string(", digits")));
  w.set_tokenizer(opt.tokenizer_name);
  std::vector<int32_t> boxes, labels;
  for (int64_t i = 0; i < n; ++i) {
    SceneRng rng(opt.seed, uint64_t(i));
    const ColourScene s =
        compose_colour_scene(lib.get(), sc, pool[size_t(i)], rng);
    const std::string png = encode_png(s.rgb.data(), sc.size, sc.size, 3);
    const int64_t image =
        w.add_encoded(reinterpret_cast<const uint8_t*>(png.data()), png.size(), sc.size, sc.size, 3);
    for (const ColourItem& it : s.items) {
      std::string q = kAsk[rng.range(0, int64_t(std::size(kAsk)) - 1)];  // drawn either way: the same scenes
      q.replace(q.find("{}"), 2, kColourPalette[it.colour].name);
      const SceneClass& c = classes[size_t(it.class_id)];
      if (sc.question == ColourQuestion::ColourLast) q = cat("which item is ", kColourPalette[it.colour].name);
      add_caption_checked(w, image, sc.question == ColourQuestion::ColourLast ? c.name : c.a_noun, q,
                          cat("scene ", i), opt);
      boxes.insert(boxes.end(), {it.box.x0, it.box.y0, it.box.x1, it.box.y1});
      labels.push_back(it.class_id);
    }
    build_progress(opt, "colours", i + 1, n);
  }
  return finish_labelled_build(w, std::move(boxes), std::move(labels), names, splits);
}

}  // namespace vlm

// The options of `vlm data` (apps/data_tool.h).
#include "apps/data_tool.h"

#include "base/error.h"

namespace vlm {

const OptionSet<DataTool>& data_tool() {
  static const OptionSet<DataTool> set([](OptionSet<DataTool>& s) {
    using D = DataTool;
    const auto build = [](auto field) { return at(&D::build, field); };
    const auto scene = [](auto field) { return at(&D::scene, field); };
    const auto colour = [](auto field) { return at(&D::colour, field); };
    s.option("data.from", &D::from,
             "source kind for `data build` (scenes, colours: generated question-answer scenes, "
             "docs/dataset-format.md)")
        .one_of({"", "fashion-mnist", "tuxpaint", "jsonl", "llava", "scenes", "colours"});
    s.option("data.input", &D::input,
             "build: IDX folder (fashion-mnist, scenes, colours), stamps folder (tuxpaint), .jsonl or LLaVA .json "
             "file");
    s.option("data.images", &D::images, "build: folder the jsonl/llava image paths are relative to "
                                        "(default: the folder of --data.input)");
    s.option("data.out", &D::out, "output file (.h5 for build, .json for tokenizer)");
    s.option("data.limit", build(&BuildOptions::limit),
             "build: convert at most N images (0 = all); scenes, colours: the number of scenes (10000 when not given)")
        .at_least(0);
    s.option("data.scene_size", scene(&SceneOptions::size),
             "build scenes: side of the square scene images in pixels (scenes: at least 96; colours: default 64, a "
             "multiple of data.colour_grid)")
        .range(8, kMaxSceneSize);
    s.option("data.colour_grid", colour(&ColourSceneOptions::grid),
             "build colours: slots per side of the scene (one item per slot at most)")
        .range(1, 64);
    s.option("data.colour_classes", colour(&ColourSceneOptions::classes),
             "build colours: the items, digits 0-9 or Fashion-MNIST's 10 classes")
        .choices({{"digits", ColourClasses::Digits}, {"fashion", ColourClasses::Fashion}});
    s.option("data.colour_items", colour(&ColourSceneOptions::max_items),
             "build colours: most items per scene (each in its own colour)")
        .range(kColourMinItems, kColourPaletteSize);
    s.option("data.colour_min_items", colour(&ColourSceneOptions::min_items),
             "build colours: fewest items per scene (the count is uniform in [this, data.colour_items]; 1 makes "
             "scenes whose question needs no search, for a curriculum: docs/lod-recipe.md)")
        .range(kColourMinItems, kColourPaletteSize);
    s.option("data.colour_question", colour(&ColourSceneOptions::question),
             "build colours: sentence = \"what is the red item?\" or \"which item is red?\" -> \"a seven\"; "
             "colour_last = \"which item is red\" -> \"seven\" (the colour's row predicts the class)")
        .choices({{"sentence", ColourQuestion::Sentence}, {"colour_last", ColourQuestion::ColourLast}});
    s.option("data.colour_block_items", colour(&ColourSceneOptions::block_items),
             "build colours: 0 = items anywhere; K in 2..4 = items K to a block of 2 x 2 slots, so that pooling a "
             "block always mixes K of them (an even grid, item counts multiples of K)")
        .range(0, 4);
    s.option("data.stamp_fraction", scene(&SceneOptions::stamp_fraction),
             "build scenes: probability that an item is a Tux Paint stamp (0 = Fashion-MNIST items only)")
        .range(0, 1);
    s.option("data.stamps", &D::stamps, "build scenes: Tux Paint stamps folder (\"\" = /usr/share/tuxpaint/stamps)");
    s.option("data.val_fraction", build(&BuildOptions::val_fraction), "build: fraction of (train) images held out as val")
        .range(0, 0.9);
    s.option("data.test_fraction", build(&BuildOptions::test_fraction),
             "build: fraction held out as test (sources without one)")
        .range(0, 0.9);
    s.option("data.seed", build(&BuildOptions::seed), "build: seed of the val/test selection (scenes: and of every scene)")
        .range(0, INT64_MAX);
    s.option("data.tokenizer", &D::tokenizer, "tokenizer.json to tokenise the captions with");
    s.option("data.train", &D::train, "tokenizer: HDF5 file whose train captions and prompts train the tokenizer");
    s.option("data.vocab", &D::vocab, "tokenizer: vocabulary size (bytes, merges and specials)").range(262, 1 << 20);
    s.option("data.samples", &D::samples, "inspect: number of sample captions to print").range(0, 1000);
    s.option("data.max_bad_images", build(&BuildOptions::max_bad_images),
             "build: fraction of the images tried that may be skipped as missing or undecodable")
        .range(0, 1);
    s.option("data.allow_outside_images", build(&BuildOptions::allow_outside_images),
             "build: let jsonl/llava image paths leave the --data.images folder (.., absolute paths)");
  });
  return set;
}

void register_data_tool_options(Config& c) { data_tool().add_to(c); }

const std::string& required_option(const DataTool& d, std::string DataTool::*field) {
  VLM_REQUIRE(!(d.*field).empty(), "--", data_tool().name_of(field), " is required");
  return d.*field;
}

std::string file_or_option(const Config& c, const DataTool& d, std::string DataTool::*field) {
  if (!c.positional().empty()) return c.positional()[0];
  return required_option(d, field);
}

const char* const kDataUsage =
    "[FILE] [--data.* options]\n"
    "  build      convert a source (--data.from) into an HDF5 dataset (--data.out)\n"
    "  inspect    print counts, image sizes, caption lengths and samples of FILE; check every\n"
    "             caption and prompt (UTF-8) and decode every image (exit 2 when any fails)\n"
    "  tokenizer  train a byte-level BPE tokenizer on FILE's train captions and prompts\n"
    "  tokenize   (re)write FILE's caption tokens with --data.tokenizer";

}  // namespace vlm

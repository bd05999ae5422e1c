// `vlm data <build|inspect|tokenizer|tokenize>`: dataset tools (schema in
// docs/dataset-format.md). Every option lives under `data.*` (INI section [data] or --data.x).
//   vlm data build --data.from fashion-mnist|tuxpaint|jsonl|llava --data.input PATH
//                  [--data.images DIR] --data.out FILE.h5 [--data.limit N]
//                  [--data.val_fraction F] [--data.test_fraction F] [--data.seed S]
//                  [--data.tokenizer tok.json]
//   vlm data build --data.from scenes --data.out FILE.h5 [--data.limit N] [--data.seed S]
//                  [--data.scene_size 224] [--data.stamp_fraction F] [--data.stamps DIR]
//   vlm data build --data.from colours --data.out FILE.h5 [--data.limit N] [--data.seed S]
//                  [--data.scene_size 64] [--data.colour_grid 4] [--data.colour_items 4]
//                  [--data.colour_classes digits|fashion]
//   vlm data inspect FILE.h5 [--data.samples K]   (also reads every caption and prompt and
//                  decodes every image: exit 2 when a text is not UTF-8 or an image fails)
//   vlm data tokenizer --data.train FILE.h5 --data.vocab N --data.out tok.json
//   vlm data tokenize FILE.h5 --data.tokenizer tok.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_check.h"
#include "data/text/tokenizer.h"
#include "io/atomic_file.h"

namespace vlm {

namespace {

// Every option of the subcommands; the converters' own are read into BuildOptions and
// SceneOptions (data/convert/converters.h), whose defaults are the options' defaults.
struct DataTool {
  std::string from, input, images, out, stamps, tokenizer, train;
  BuildOptions build;
  SceneOptions scene;
  ColourSceneOptions colour;
  int vocab = 4096, samples = 5;
};

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

void register_options(Config& c) { data_tool().add_to(c); }

// The value of a string option the subcommand needs ("--data.out is required").
const std::string& need(const DataTool& d, std::string DataTool::*field) {
  VLM_REQUIRE(!(d.*field).empty(), "--", data_tool().name_of(field), " is required");
  return d.*field;
}

std::string positional_or(const Config& c, const DataTool& d, std::string DataTool::*field) {
  if (!c.positional().empty()) return c.positional()[0];
  return need(d, field);
}

int do_build(const Config& c) {
  const DataTool d = data_tool().read(c);
  BuildOptions o = d.build;
  o.out = need(d, &DataTool::out);
  const auto opt = [](std::string DataTool::*f) { return "--" + data_tool().name_of(f); };
  check_output_path(o.out, {{opt(&DataTool::input), d.input}, {opt(&DataTool::tokenizer), d.tokenizer},
                            {opt(&DataTool::stamps), d.stamps}});
  // Loaded first: a bad tokenizer fails before anything is converted.
  std::optional<Tokenizer> tok;
  if (!d.tokenizer.empty()) {
    tok = Tokenizer::load(d.tokenizer);
    o.tokenizer = &*tok;
    o.tokenizer_name = d.tokenizer;
  }
  const std::string from = need(d, &DataTool::from);
  std::string input = d.input;
  if ((from == "scenes" || from == "colours") && !data_tool().is_set(c, at(&DataTool::build, &BuildOptions::limit)))
    o.limit = kDefaultScenes;
  if (input.empty() && (from == "fashion-mnist" || from == "scenes" || from == "colours"))
    input = "/usr/share/datasets/fashion-mnist";
  if (input.empty() && from == "tuxpaint") input = "/usr/share/tuxpaint/stamps";
  VLM_REQUIRE(!input.empty(), "--data.input is required for --data.from ", from);
  std::string images = d.images;
  if (images.empty()) images = std::filesystem::path(input).parent_path().string();
  const auto t0 = std::chrono::steady_clock::now();
  BuildReport r;
  if (from == "scenes") {
    SceneOptions so = d.scene;
    so.fashion_dir = input;
    if (!d.stamps.empty()) so.stamps_dir = d.stamps;
    r = build_scenes(so, o);
  } else if (from == "colours") {
    ColourSceneOptions co = d.colour;  // data.scene_size is the scenes' option, 64 unless given
    if (data_tool().is_set(c, at(&DataTool::scene, &SceneOptions::size))) co.size = d.scene.size;
    co.fashion_dir = input;
    r = build_colour_scenes(co, o);
  } else if (from == "fashion-mnist") r = build_fashion_mnist(input, o);
  else if (from == "tuxpaint") r = build_tuxpaint(input, o);
  else if (from == "jsonl") r = build_from_jsonl(input, images, o);
  else r = build_from_llava(input, images, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s: %lld images, %lld captions, %lld skipped, %.1f MB in %.1f s\n", o.out.c_str(),
              (long long)r.images, (long long)r.captions, (long long)r.skipped,
              double(std::filesystem::file_size(o.out)) / 1e6, s);
  return 0;
}

int do_inspect(const Config& c) {
  const DataTool d = data_tool().read(c);
  const std::string path = positional_or(c, d, &DataTool::input);
  const DatasetReader r(path);
  std::printf("%s: format vlm-image-text v%lld, storage %s, source '%s'\n", path.c_str(), (long long)r.version(),
              r.raw() ? "raw" : "encoded", r.source().c_str());
  std::printf("images %lld, captions %lld, splits train %zu / val %zu / test %zu (images)\n",
              (long long)r.num_images(), (long long)r.num_captions(), r.split("train").size(),
              r.split("val").size(), r.split("test").size());
  std::map<std::pair<int, int>, int64_t> sizes;
  int64_t bytes = 0;
  for (int64_t i = 0; i < r.num_images(); ++i) {
    const ImageInfo inf = r.image_info(i);
    sizes[{inf.height, inf.width}]++;
    bytes += r.image_bytes(i);
  }
  std::printf("image sizes (HxW: count), %zu distinct:", sizes.size());
  int shown = 0;
  for (const auto& [hw, n] : sizes)
    if (shown++ < 8) std::printf(" %dx%d:%lld", hw.first, hw.second, (long long)n);
  std::printf("%s\nimage bytes: %.1f MB (%.0f per image)\n", sizes.size() > 8 ? " ..." : "", bytes / 1e6,
              r.num_images() ? double(bytes) / double(r.num_images()) : 0.0);
  std::fflush(stdout);
  const DatasetCheck chk = [&] {
    QuietStderr quiet;  // libpng/libjpeg's own messages: the count below replaces them
    return check_dataset(r, int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  }();
  if (chk.captions > 0)
    std::printf("caption bytes: min %lld, mean %.1f, max %lld\n", (long long)chk.caption_bytes_min,
                double(chk.caption_bytes_sum) / double(chk.captions), (long long)chk.caption_bytes_max);
  std::printf("text: %lld captions and %lld prompts, all valid UTF-8\n", (long long)chk.captions,
              (long long)chk.prompts);
  if (r.raw())
    std::printf("images: raw pixels (nothing to decode)\n");
  else if (chk.bad_images == 0)
    std::printf("images: all %lld decode to their recorded size\n", (long long)chk.images);
  else
    std::printf("images: %lld of %lld cannot be used (first: %s)\n", (long long)chk.bad_images,
                (long long)chk.images, chk.first_reason.c_str());
  std::printf("tokens: %s\n", r.has_tokens() ? ("present (" + r.tokenizer_name() + ")").c_str() : "absent");
  if (r.has_boxes() || !r.caption_labels().empty())
    std::printf("caption boxes: %s, caption labels: %s (%zu classes)\n", r.has_boxes() ? "present" : "absent",
                r.caption_labels().empty() ? "absent" : "present", r.caption_class_names().size());
  const int64_t k = std::min<int64_t>(d.samples, r.num_captions());
  for (int64_t s = 0; s < k; ++s) {
    const int64_t j = s * r.num_captions() / std::max<int64_t>(k, 1);
    const ImageInfo inf = r.image_info(r.caption_image(j));
    std::printf("  [%lld] image %lld (%dx%dx%d): ", (long long)j, (long long)r.caption_image(j), inf.height,
                inf.width, inf.channels);
    if (!r.prompt(j).empty()) std::printf("\"%s\" -> ", r.prompt(j).c_str());
    std::printf("\"%s\"", r.caption(j).c_str());
    if (!r.labels().empty()) std::printf(" label %d", r.labels()[size_t(r.caption_image(j))]);
    if (r.has_boxes()) {
      const CaptionBox b = r.box(j);
      std::printf(" box [%d,%d,%d,%d)", b.x0, b.y0, b.x1, b.y1);
    }
    if (!r.caption_labels().empty()) {
      const int32_t l = r.caption_labels()[size_t(j)];
      const auto& names = r.caption_class_names();
      std::printf(" class %d%s%s", l, size_t(l) < names.size() ? " " : "",
                  size_t(l) < names.size() ? names[size_t(l)].c_str() : "");
    }
    if (r.has_tokens()) std::printf(" (%zu tokens)", r.tokens(j).size());
    std::printf("\n");
  }
  if (chk.bad_images > 0) {
    std::string idx;
    for (int64_t i : chk.first_bad) idx += (idx.empty() ? "" : ", ") + std::to_string(i);
    if (chk.bad_images > int64_t(chk.first_bad.size())) idx += ", ...";
    throw UserError(cat(path, ": ", chk.bad_images, " of ", chk.images, " images cannot be used (images ", idx,
                        "; first: ", chk.first_reason, "); rebuild the dataset: vlm data build writes only images "
                        "that decode, with their decoded size"));
  }
  return 0;
}

int do_tokenizer(const Config& c) {
  const DataTool d = data_tool().read(c);
  const std::string path = positional_or(c, d, &DataTool::train);
  const std::string out = need(d, &DataTool::out);
  check_output_path(out, {{c.positional().empty() ? "--" + data_tool().name_of(&DataTool::train) : "FILE", path}});
  const DatasetReader r(path);
  // Captions and their prompts (questions): the texts a model trained on FILE reads.
  std::vector<std::string> texts;
  for (int64_t j : r.split_captions("train")) {
    texts.push_back(r.caption(j));
    if (std::string p = r.prompt(j); !p.empty()) texts.push_back(std::move(p));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::train(texts, d.vocab);
  tok.save(out);
  size_t bytes = 0, ids = 0;
  for (const auto& t : texts) bytes += t.size(), ids += tok.encode(t).size();
  std::printf("wrote %s: vocab %d (%d merges) from %zu captions and prompts in %.1f s; %.2f bytes per token\n",
              out.c_str(), tok.vocab_size(), tok.num_merges(), texts.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              ids ? double(bytes) / double(ids) : 0.0);
  return 0;
}

int do_tokenize(const Config& c) {
  const DataTool d = data_tool().read(c);
  const std::string path = positional_or(c, d, &DataTool::input);
  const std::string tp = need(d, &DataTool::tokenizer);
  tokenize_captions(path, Tokenizer::load(tp), tp);
  std::printf("tokenised the captions of %s with %s\n", path.c_str(), tp.c_str());
  return 0;
}

// Every subcommand takes the same options (register_options) and this usage.
const char* const kUsage =
    "[FILE] [--data.* options]\n"
    "  build      convert a source (--data.from) into an HDF5 dataset (--data.out)\n"
    "  inspect    print counts, image sizes, caption lengths and samples of FILE; check every\n"
    "             caption and prompt (UTF-8) and decode every image (exit 2 when any fails)\n"
    "  tokenizer  train a byte-level BPE tokenizer on FILE's train captions and prompts\n"
    "  tokenize   (re)write FILE's caption tokens with --data.tokenizer";

}  // namespace

VLM_COMMAND(data, {.path = "data", .summary = "build, inspect and tokenise image-text HDF5 datasets"});
VLM_COMMAND(data_build, {.path = "data build",
                         .summary = "convert a source (--data.from) into an HDF5 dataset (--data.out)",
                         .usage = kUsage,
                         .options = register_options,
                         .run = do_build});
VLM_COMMAND(data_inspect, {.path = "data inspect",
                           .summary = "print counts, sizes and samples of FILE; check every text and image",
                           .usage = kUsage,
                           .options = register_options,
                           .run = do_inspect,
                           .positional = 1});
VLM_COMMAND(data_tokenizer, {.path = "data tokenizer",
                             .summary = "train a byte-level BPE tokenizer on FILE's train captions and prompts",
                             .usage = kUsage,
                             .options = register_options,
                             .run = do_tokenizer,
                             .positional = 1});
VLM_COMMAND(data_tokenize, {.path = "data tokenize",
                            .summary = "(re)write FILE's caption tokens with --data.tokenizer",
                            .usage = kUsage,
                            .options = register_options,
                            .run = do_tokenize,
                            .positional = 1});

}  // namespace vlm

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
//   vlm data inspect FILE.h5 [--data.samples K]
//   vlm data tokenizer --data.train FILE.h5 --data.vocab N --data.out tok.json
//   vlm data tokenize FILE.h5 --data.tokenizer tok.json
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "apps/command.h"
#include "base/config.h"
#include "base/error.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"
#include "data/storage/dataset.h"
#include "data/text/tokenizer.h"
#include "io/atomic_file.h"

namespace vlm {

namespace {

void register_options(Config& c) {
  c.add_choice("data.from", "", {"", "fashion-mnist", "tuxpaint", "jsonl", "llava", "scenes", "colours"},
               "source kind for `data build` (scenes, colours: generated question-answer scenes, "
               "docs/dataset-format.md)");
  c.add_string("data.input", "",
               "build: IDX folder (fashion-mnist, scenes, colours), stamps folder (tuxpaint), .jsonl or LLaVA .json file");
  c.add_string("data.images", "", "build: folder the jsonl/llava image paths are relative to "
                                  "(default: the folder of --data.input)");
  c.add_string("data.out", "", "output file (.h5 for build, .json for tokenizer)");
  c.add_int("data.limit", 0, "build: convert at most N images (0 = all); scenes, colours: the number of scenes (10000 when not given)",
            0);
  c.add_int("data.scene_size", 224, "build scenes: side of the square scene images in pixels (scenes: at least 96; "
            "colours: default 64, a multiple of data.colour_grid)", 8, kMaxSceneSize);
  c.add_int("data.colour_grid", 4, "build colours: slots per side of the scene (one item per slot at most)", 1, 64);
  c.add_choice("data.colour_classes", "digits", {"digits", "fashion"},
               "build colours: the items, digits 0-9 or Fashion-MNIST's 10 classes");
  c.add_int("data.colour_items", 4, "build colours: most items per scene (each in its own colour; at least 2)", 2,
            kColourPaletteSize);
  c.add_float("data.stamp_fraction", 0.25,
              "build scenes: probability that an item is a Tux Paint stamp (0 = Fashion-MNIST items only)", 0, 1);
  c.add_string("data.stamps", "", "build scenes: Tux Paint stamps folder (\"\" = /usr/share/tuxpaint/stamps)");
  c.add_float("data.val_fraction", 0.05, "build: fraction of (train) images held out as val", 0, 0.9);
  c.add_float("data.test_fraction", 0.05, "build: fraction held out as test (sources without one)", 0, 0.9);
  c.add_int("data.seed", 0, "build: seed of the val/test selection (scenes: and of every scene)", 0);
  c.add_string("data.tokenizer", "", "tokenizer.json to tokenise the captions with");
  c.add_string("data.train", "", "tokenizer: HDF5 file whose train captions and prompts train the tokenizer");
  c.add_int("data.vocab", 4096, "tokenizer: vocabulary size (bytes, merges and specials)", 262, 1 << 20);
  c.add_int("data.samples", 5, "inspect: number of sample captions to print", 0, 1000);
  c.add_float("data.max_bad_images", 0.1,
              "build: fraction of the images tried that may be skipped as missing or undecodable", 0, 1);
  c.add_flag("data.allow_outside_images", false,
             "build: let jsonl/llava image paths leave the --data.images folder (.., absolute paths)");
}

std::string need(const Config& c, const char* name) {
  const std::string& v = c.get_string(name);
  VLM_REQUIRE(!v.empty(), "--", name, " is required");
  return v;
}

std::string positional_or(const Config& c, const char* name) {
  if (!c.positional().empty()) return c.positional()[0];
  return need(c, name);
}

int do_build(const Config& c) {
  BuildOptions o;
  o.out = need(c, "data.out");
  check_output_path(o.out);
  o.limit = c.get_int("data.limit");
  o.val_fraction = c.get_float("data.val_fraction");
  o.test_fraction = c.get_float("data.test_fraction");
  o.seed = uint64_t(c.get_int("data.seed"));
  o.max_bad_images = c.get_float("data.max_bad_images");
  o.allow_outside_images = c.get_flag("data.allow_outside_images");
  // Loaded first: a bad tokenizer fails before anything is converted.
  std::optional<Tokenizer> tok;
  if (!c.get_string("data.tokenizer").empty()) {
    tok = Tokenizer::load(c.get_string("data.tokenizer"));
    o.tokenizer = &*tok;
    o.tokenizer_name = c.get_string("data.tokenizer");
  }
  const std::string from = need(c, "data.from");
  std::string input = c.get_string("data.input");
  if ((from == "scenes" || from == "colours") && !c.is_set("data.limit")) o.limit = kDefaultScenes;
  if (input.empty() && (from == "fashion-mnist" || from == "scenes" || from == "colours")) input = "/usr/share/datasets/fashion-mnist";
  if (input.empty() && from == "tuxpaint") input = "/usr/share/tuxpaint/stamps";
  VLM_REQUIRE(!input.empty(), "--data.input is required for --data.from ", from);
  std::string images = c.get_string("data.images");
  if (images.empty()) images = std::filesystem::path(input).parent_path().string();
  const auto t0 = std::chrono::steady_clock::now();
  BuildReport r;
  if (from == "scenes") {
    SceneOptions so;
    so.size = int(c.get_int("data.scene_size"));
    so.stamp_fraction = c.get_float("data.stamp_fraction");
    so.fashion_dir = input;
    if (!c.get_string("data.stamps").empty()) so.stamps_dir = c.get_string("data.stamps");
    r = build_scenes(so, o);
  } else if (from == "colours") {
    ColourSceneOptions co;
    co.size = c.is_set("data.scene_size") ? int(c.get_int("data.scene_size")) : co.size;
    co.grid = int(c.get_int("data.colour_grid"));
    co.max_items = int(c.get_int("data.colour_items"));
    co.classes = c.get_string("data.colour_classes") == "fashion" ? ColourClasses::Fashion : ColourClasses::Digits;
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
  const std::string path = positional_or(c, "data.input");
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
  int64_t lo = INT64_MAX, hi = 0, sum = 0;
  for (int64_t j = 0; j < r.num_captions(); ++j) {
    const int64_t n = int64_t(r.caption(j).size());
    lo = std::min(lo, n), hi = std::max(hi, n), sum += n;
  }
  if (r.num_captions() > 0)
    std::printf("caption bytes: min %lld, mean %.1f, max %lld\n", (long long)lo,
                double(sum) / double(r.num_captions()), (long long)hi);
  std::printf("tokens: %s\n", r.has_tokens() ? ("present (" + r.tokenizer_name() + ")").c_str() : "absent");
  if (r.has_boxes() || !r.caption_labels().empty())
    std::printf("caption boxes: %s, caption labels: %s (%zu classes)\n", r.has_boxes() ? "present" : "absent",
                r.caption_labels().empty() ? "absent" : "present", r.caption_class_names().size());
  const int64_t k = std::min<int64_t>(c.get_int("data.samples"), r.num_captions());
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
  return 0;
}

int do_tokenizer(const Config& c) {
  const std::string path = c.positional().empty() ? need(c, "data.train") : c.positional()[0];
  const std::string out = need(c, "data.out");
  check_output_path(out);
  const DatasetReader r(path);
  // Captions and their prompts (questions): the texts a model trained on FILE reads.
  std::vector<std::string> texts;
  for (int64_t j : r.split_captions("train")) {
    texts.push_back(r.caption(j));
    if (std::string p = r.prompt(j); !p.empty()) texts.push_back(std::move(p));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::train(texts, int(c.get_int("data.vocab")));
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
  const std::string path = positional_or(c, "data.input");
  const std::string tp = need(c, "data.tokenizer");
  tokenize_captions(path, Tokenizer::load(tp), tp);
  std::printf("tokenised the captions of %s with %s\n", path.c_str(), tp.c_str());
  return 0;
}

// Every subcommand takes the same options (register_options) and this usage.
const char* const kUsage =
    "[FILE] [--data.* options]\n"
    "  build      convert a source (--data.from) into an HDF5 dataset (--data.out)\n"
    "  inspect    print counts, image sizes, caption lengths and samples of FILE\n"
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
                           .summary = "print counts, image sizes, caption lengths and samples of FILE",
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

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
//   vlm data inspect FILE.h5 [--data.samples K]   (apps/cmd_data_inspect.cpp)
//   vlm data tokenizer --data.train FILE.h5 --data.vocab N --data.out tok.json
//   vlm data tokenize FILE.h5 --data.tokenizer tok.json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "apps/command.h"
#include "apps/data_tool.h"
#include "base/error.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "data/text/tokenizer.h"
#include "io/atomic_file.h"

namespace vlm {

namespace {

int do_build(const Config& c) {
  const DataTool d = data_tool().read(c);
  BuildOptions o = d.build;
  o.out = required_option(d, &DataTool::out);
  const auto opt = [](std::string DataTool::*f) { return "--" + data_tool().name_of(f); };
  check_output_path(o.out, {{opt(&DataTool::input), d.input}, {opt(&DataTool::tokenizer), d.tokenizer},
                            {opt(&DataTool::stamps), d.stamps}});
  // Loaded first: a bad tokenizer fails before anything is converted.
  std::optional<Tokenizer> tok;
  if (!d.tokenizer.empty()) {
    tok = Tokenizer::load(d.tokenizer);
    o.tokenizer = &*tok;
    o.tokenizer_name = tokenizer_name_in(o.out, d.tokenizer);
  }
  const std::string from = required_option(d, &DataTool::from);
  std::string input = d.input;
  if ((from == "scenes" || from == "colours") && !data_tool().is_set(c, at(&DataTool::build, &BuildOptions::limit)))
    o.limit = kDefaultScenes;
  if (input.empty() && (from == "fashion-mnist" || from == "scenes" || from == "colours"))
    input = "/usr/share/datasets/fashion-mnist";
  if (input.empty() && from == "tuxpaint") input = "/usr/share/tuxpaint/stamps";
  VLM_REQUIRE(!input.empty(), "--data.input is required for --data.from ", from);
  std::string images = d.images;
  VLM_REQUIRE(images.empty() || std::filesystem::is_directory(images), "--data.images ", images,
              ": expected the folder the input's image paths are relative to");
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

int do_tokenizer(const Config& c) {
  const DataTool d = data_tool().read(c);
  const std::string path = file_or_option(c, d, &DataTool::train);
  const std::string out = required_option(d, &DataTool::out);
  check_output_path(out, {{c.positional().empty() ? "--" + data_tool().name_of(&DataTool::train) : "FILE", path}});
  const DatasetReader r(path);
  // Captions and their prompts (questions): the texts a model trained on FILE reads.
  std::vector<std::string> texts;
  for (int64_t j : r.split_captions("train")) {
    texts.push_back(r.caption(j));
    if (std::string p = r.prompt(j); !p.empty()) texts.push_back(std::move(p));
  }
  VLM_REQUIRE(!texts.empty(), path, ": the train split has no caption (nothing to train a tokenizer on)");
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
  const std::string path = file_or_option(c, d, &DataTool::input);
  const std::string tp = required_option(d, &DataTool::tokenizer);
  VLM_REQUIRE(d.out.empty(), "--data.out ", d.out, ": `vlm data tokenize` writes no other file, it rewrites ", path,
              " in place (copy it first to keep the old tokens)");
  tokenize_captions(path, Tokenizer::load(tp), tokenizer_name_in(path, tp));
  std::printf("tokenised the captions of %s with %s\n", path.c_str(), tp.c_str());
  return 0;
}

}  // namespace

VLM_COMMAND(data, {.path = "data", .summary = "build, inspect and tokenise image-text HDF5 datasets"});
VLM_COMMAND(data_build, {.path = "data build",
                         .summary = "convert a source (--data.from) into an HDF5 dataset (--data.out)",
                         .usage = kDataUsage,
                         .options = register_data_tool_options,
                         .run = do_build});
VLM_COMMAND(data_tokenizer, {.path = "data tokenizer",
                             .summary = "train a byte-level BPE tokenizer on FILE's train captions and prompts",
                             .usage = kDataUsage,
                             .options = register_data_tool_options,
                             .run = do_tokenizer,
                             .positional = 1});
VLM_COMMAND(data_tokenize, {.path = "data tokenize",
                            .summary = "(re)write FILE's caption tokens with --data.tokenizer",
                            .usage = kDataUsage,
                            .options = register_data_tool_options,
                            .run = do_tokenize,
                            .positional = 1});

}  // namespace vlm

// `vlm data build` converters: each turns one kind of source into a schema-v1 HDF5 file.
// Invariants shared by all converters (the policies are stated in docs/errors.md):
//  - Deterministic output for the same input and options (sorted file order, seeded
//    splits from DistributedSampler::permutation).
//  - The output is written through DatasetWriter, i.e. under a temporary name renamed
//    over BuildOptions::out only when complete: a build that fails leaves it untouched.
//  - Images are stored as the source's bytes (encoded) unless all sizes agree and the
//    source is raw pixels (Fashion-MNIST: raw [N,28,28,1]).
//  - Image problems skip the image: one that is missing, not a regular file, larger
//    than schema::kMaxImageBytes or not a decodable PNG/JPEG is skipped with a warning
//    and counted in BuildReport::bad. The build fails when no image is usable, or when
//    more than BuildOptions::max_bad_images of the images tried are bad.
//  - Text problems fail the build with the input's file:line (or entry): input that is
//    not valid JSON (hence not UTF-8), a missing or mistyped field, a caption that is
//    not valid UTF-8 or longer than schema::kMaxCaptionBytes, more tokens than
//    schema::kMaxCaptionTokens, an input with no entries, an input that is a directory.
//  - Image paths of JSONL/LLaVA files are relative to the image folder and must stay
//    inside it (lexically, after resolving . and ..; absolute paths too), unless
//    BuildOptions::allow_outside_images.
//  - Splits: the source's own split when it has one (Fashion-MNIST train/test);
//    otherwise val_fraction and test_fraction of the images, chosen by the seeded
//    permutation; val is always carved from train this way.
//  - Generated data (scenes) is a function of the options alone: the same options and
//    inputs give a byte-identical file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/convert/idx.h"

namespace vlm {

class DatasetWriter;

class Tokenizer;

struct BuildOptions {
  std::string out;            // HDF5 file to write
  int64_t limit = 0;          // convert at most this many images (0 = all)
  double val_fraction = 0.05;
  double test_fraction = 0.05;  // only where the source has no official test split
  uint64_t seed = 0;
  bool progress = true;       // progress lines on stdout (stderr is for the error line)
  double max_bad_images = 0.1;  // fraction of the images tried that may be skipped as bad
  bool allow_outside_images = false;  // image paths may leave the image folder
  const Tokenizer* tokenizer = nullptr;  // when set, captions get their token ids
  std::string tokenizer_name;            // stored as /captions@tokenizer
};

struct BuildReport {
  int64_t images = 0, captions = 0;
  int64_t skipped = 0;  // entries not converted (bad images included)
  int64_t bad = 0;      // images tried and skipped (missing, not decodable, too large)
};

// JSONL: one object per line, {"image": "rel/path.png", "caption": "..."} (or
// "captions": [...]; optional "prompt"); paths relative to image_root. The same image on
// several lines becomes one image with several captions.
BuildReport build_from_jsonl(const std::string& jsonl, const std::string& image_root,
                             const BuildOptions& opt);
// LLaVA JSON: an array of {"image": ..., "conversations": [{"from": "human"|"gpt",
// "value": ...}, ...]}; every gpt turn is a caption whose prompt is the preceding human
// turn with the "<image>" tag removed. Entries without an image (absent or null) are
// skipped and counted, system turns too; any other field of the wrong type, or another
// "from", fails the build naming the entry and turn.
BuildReport build_from_llava(const std::string& json, const std::string& image_root,
                             const BuildOptions& opt);
// Fashion-MNIST IDX files in dir (train-/t10k- images/labels, .gz or plain).
BuildReport build_fashion_mnist(const std::string& dir, const BuildOptions& opt);
// Tux Paint stamps: every *.png under dir with a sibling .txt (first line = caption).
BuildReport build_tuxpaint(const std::string& dir, const BuildOptions& opt);

// Scenes (convert_scenes.cpp; docs/dataset-format.md, "Scenes"): opt.limit (>= 1) scenes of
// size x size RGB pixels, each with 2-6 items (Fashion-MNIST pictures in colour, and
// with probability stamp_fraction per item a Tux Paint stamp) and clutter made of item
// fragments; every caption answers a question (the prompt) about one item, whose box
// and class are stored with it. Stored encoded (PNG); random val/test splits, whose
// scenes draw their Fashion-MNIST pictures from the t10k images (test) or a part of
// the train images of their own (val).
struct SceneOptions {
  int size = 224;                // side of the square scene, kMinSceneSize..kMaxSceneSize
  double stamp_fraction = 0.25;  // probability that an item is a stamp (0: no stamps read)
  std::string fashion_dir = "/usr/share/datasets/fashion-mnist";
  std::string stamps_dir = "/usr/share/tuxpaint/stamps";
};
inline constexpr int kMinSceneSize = 96, kMaxSceneSize = 2048;
inline constexpr int64_t kDefaultScenes = 10000;  // `vlm data build --data.from scenes` without --data.limit
BuildReport build_scenes(const SceneOptions& scene, const BuildOptions& opt);

// Colour scenes (convert_colours.cpp, colour_compose.h; docs/dataset-format.md, "Colour
// scenes"): opt.limit (>= 1) scenes of size x size RGB pixels on a grid x grid array of
// slots, with min_items..max_items items (in blocks of 2 x 2 slots with block_items) (digits or Fashion-MNIST pictures), each in its own
// slot and its own named colour, on grey clutter; one caption per item: "what is the
// <colour> item?" -> its class noun, with its box and class (schema version 2). Splits
// (and, for Fashion-MNIST, picture pools) as scenes.
// What the items are: the digits 0-9 (drawn by data/image/glyph.h) or Fashion-MNIST's 10
// classes.
enum class ColourClasses { Digits, Fashion };
// How an item is asked about: Sentence, "what is the red item?" or "which item is red?" ->
// "a seven"; ColourLast, "which item is red" -> "seven": the prompt ends with the colour
// and the answer starts with the class, so the row of the colour predicts the class and
// one attention from it can find the item (docs/lod-recipe.md, "Asking with the
// colour last").
enum class ColourQuestion { Sentence, ColourLast };
inline constexpr int kColourMinItems = 1;  // the fewest items a scene may have
struct ColourSceneOptions {
  int size = 64;      // side of the square scene, a multiple of grid
  int grid = 4;       // slots per side (size / grid >= kColourMinSlot pixels each)
  int min_items = 2;  // items per scene at least (kColourMinItems..max_items)
  int max_items = 4;  // items per scene at most (kColourMinItems..min(palette, grid^2))
  // 0: the items' slots are drawn anywhere; K in 2..4: the items fill n / K blocks of 2 x 2
  // slots, K in each (an even grid; min_items and max_items multiples of K), so that
  // pooling a block always mixes K items.
  int block_items = 0;
  ColourClasses classes = ColourClasses::Digits;
  ColourQuestion question = ColourQuestion::Sentence;
  std::string fashion_dir = "/usr/share/datasets/fashion-mnist";
};
BuildReport build_colour_scenes(const ColourSceneOptions& scene, const BuildOptions& opt);

// Caption of a Fashion-MNIST image with label 0..9 (phrasing picked by image index).
std::string fashion_caption(int label, int64_t image);
// The Fashion-MNIST class names, labels 0..9 ("T-shirt/top", ..., "Ankle boot").
const std::vector<std::string>& fashion_class_names();

// The Fashion-MNIST IDX files of dir (train-/t10k- images/labels, .gz or plain), checked:
// 28 x 28 images, one label 0..9 per image (UserError naming the file otherwise). At most
// max_train / max_test images of each part (0 = all; max_test < 0: none of the test part).
struct FashionMnist {
  IdxArray train_images, train_labels, test_images, test_labels;
  std::string train_images_path, train_labels_path, test_images_path, test_labels_path;
};
FashionMnist read_fashion_mnist(const std::string& dir, int64_t max_train, int64_t max_test);

// (Re)writes /captions/tokens and /captions/token_offsets of an existing file: each
// caption encoded as BOS caption EOS; the attribute /captions@tokenizer = name.
// Earlier tokens are unlinked first (HDF5 does not reclaim their space; h5repack does).
void tokenize_captions(const std::string& h5, const Tokenizer& tok, const std::string& name);

// ---- helpers shared by the converters (convert_common.cpp) ----
// Random val/test/train split of n images: floor(n * val_fraction) val and
// floor(n * test_fraction) test images, the first ones of the seeded permutation
// (DistributedSampler::permutation(n, seed, -1)); each split ascending.
struct Splits {
  std::vector<int64_t> train, val, test;
};
Splits random_splits(int64_t n, const BuildOptions& opt);
// random_splits written to the writer.
void write_random_splits(DatasetWriter& w, int64_t n, const BuildOptions& opt);
// The end of a labelled build (scenes, colour scenes): each caption's box and class,
// the class names and the splits written, the file finished; the images and captions
// written, reported.
BuildReport finish_labelled_build(DatasetWriter& w, std::vector<int32_t> boxes, std::vector<int32_t> labels,
                                  const std::vector<std::string>& class_names, const Splits& splits);
// Prints "[build] what: i/n" to stdout at most every ~10% (and at the end).
void build_progress(const BuildOptions& opt, const char* what, int64_t i, int64_t n);
// Silences fd 2 while alive: libpng and libjpeg print their own warnings and errors to
// stderr from inside OpenCV, while a converter reports a skipped image itself (on
// stdout) and keeps stderr for the one error line. The converters run on one thread.
class QuietStderr {
 public:
  QuietStderr();
  ~QuietStderr();
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_ = -1;
};
// Adds the file's bytes as an encoded image when it is a regular file of at most
// schema::kMaxImageBytes that decodes; false (and a warning) if not.
bool add_encoded_file(DatasetWriter& w, const std::string& path, int64_t* index);
// The path of image `rel` of the input at `where` ("file:line"): relative to `root`
// (the current folder when empty); UserError when it leaves root and
// opt.allow_outside_images is false, or when it is empty.
std::string image_path(const std::string& root, const std::string& rel, const std::string& where,
                       const BuildOptions& opt);
// Adds a caption of image `image` from the input at `where`, after the checks whose
// messages name `where`: length and UTF-8 of caption and prompt, and with
// opt.tokenizer its BOS caption EOS ids (count limit).
void add_caption_checked(DatasetWriter& w, int64_t image, std::string_view caption, std::string_view prompt,
                         const std::string& where, const BuildOptions& opt);
// The image policy: UserError naming `input` when no image is usable (tried > 0 or
// not) or when bad / tried exceeds opt.max_bad_images.
void require_usable_images(const std::string& input, int64_t tried, int64_t bad, const BuildOptions& opt);

}  // namespace vlm

// `vlm data build` converters: each turns one kind of source into a schema-v1 HDF5 file.
// Invariants shared by all converters:
//  - Deterministic output for the same input and options (sorted file order, seeded
//    splits from DistributedSampler::permutation).
//  - Images are stored as the source's bytes (encoded) unless all sizes agree and the
//    source is raw pixels (Fashion-MNIST: raw [N,28,28,1]).
//  - An image that is missing or does not decode is skipped with a warning and counted
//    in BuildReport::skipped; the build goes on.
//  - Splits: the source's own split when it has one (Fashion-MNIST train/test);
//    otherwise val_fraction and test_fraction of the images, chosen by the seeded
//    permutation; val is always carved from train this way.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vlm {

class DatasetWriter;

struct BuildOptions {
  std::string out;            // HDF5 file to write
  int64_t limit = 0;          // convert at most this many images (0 = all)
  double val_fraction = 0.05;
  double test_fraction = 0.05;  // only where the source has no official test split
  uint64_t seed = 0;
  bool progress = true;       // progress lines on stderr
};

struct BuildReport {
  int64_t images = 0, captions = 0, skipped = 0;
};

// JSONL: one object per line, {"image": "rel/path.png", "caption": "..."} (or
// "captions": [...]; optional "prompt"); paths relative to image_root. The same image on
// several lines becomes one image with several captions.
BuildReport build_from_jsonl(const std::string& jsonl, const std::string& image_root,
                             const BuildOptions& opt);
// LLaVA JSON: an array of {"image": ..., "conversations": [{"from": "human"|"gpt",
// "value": ...}, ...]}; every gpt turn is a caption whose prompt is the preceding human
// turn with the "<image>" tag removed. Entries without an image are skipped (counted).
BuildReport build_from_llava(const std::string& json, const std::string& image_root,
                             const BuildOptions& opt);
// Fashion-MNIST IDX files in dir (train-/t10k- images/labels, .gz or plain).
BuildReport build_fashion_mnist(const std::string& dir, const BuildOptions& opt);
// Tux Paint stamps: every *.png under dir with a sibling .txt (first line = caption).
BuildReport build_tuxpaint(const std::string& dir, const BuildOptions& opt);

// Caption of a Fashion-MNIST image with label 0..9 (phrasing picked by image index).
std::string fashion_caption(int label, int64_t image);

class Tokenizer;
// (Re)writes /captions/tokens and /captions/token_offsets of an existing file: each
// caption encoded as BOS caption EOS; the attribute /captions@tokenizer = name.
// Earlier tokens are unlinked first (HDF5 does not reclaim their space; h5repack does).
void tokenize_captions(const std::string& h5, const Tokenizer& tok, const std::string& name);

// ---- helpers shared by the converters (convert_common.cpp) ----
// Random val/test/train split of n images written to the writer.
void write_random_splits(DatasetWriter& w, int64_t n, const BuildOptions& opt);
// Prints "[build] what: i/n" at most every ~10% (and at the end).
void build_progress(const BuildOptions& opt, const char* what, int64_t i, int64_t n);
std::string read_text_file(const std::string& path);
// Adds the file's bytes as an encoded image if it decodes; false (and a warning) if not.
bool add_encoded_file(DatasetWriter& w, const std::string& path, int64_t* index);

}  // namespace vlm

// DatasetReader: opens an image-text HDF5 file of schema version 1 or 2 (schema.h;
// docs/dataset-format.md) and gives random access to images, captions, tokens, caption
// boxes and labels, and splits.
// Invariants established at open (violations are UserError naming file and dataset):
//  - root attrs format == "vlm-image-text" and version in 1..2; no version-2 dataset
//    (caption box or label) in a version-1 file;
//  - every required dataset exists with the schema's dtype and rank;
//  - offsets start at 0, never decrease, end at the byte dataset's length, and no single
//    image/caption exceeds the schema limits; caption -> image indices and split indices
//    are in range; caption boxes are [M,4] and inside their image, caption labels [M]
//    and in 0..#class_names-1 (>= 0 without names). Hence no later read allocates more
//    than the limits allow.
// Checked when read: every caption and prompt is valid UTF-8 (base/utf8.h), else a
// UserError naming the file, the dataset (/captions/text or /captions/prompt) and the
// caption index; so no command (inspect, tokenizer, tokenize, train, eval) accepts
// other text silently (docs/errors.md, "Text that is not UTF-8").
// Thread-safe: every HDF5 access holds h5_mutex(); returned buffers are the caller's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/h5_io.h"

namespace vlm {

struct ImageInfo {
  int height = 0, width = 0, channels = 0;
};

// A caption's box: x0 <= x < x1, y0 <= y < y1 in pixels of its image (schema::kCapBox).
struct CaptionBox {
  int32_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool operator==(const CaptionBox&) const = default;
};

class DatasetReader {
 public:
  explicit DatasetReader(const std::string& path);

  const std::string& path() const { return path_; }
  int64_t version() const { return version_; }
  int64_t num_images() const { return n_images_; }
  int64_t num_captions() const { return int64_t(cap_image_.size()); }
  bool raw() const { return raw_; }
  std::string source() const { return source_; }
  ImageInfo image_info(int64_t i) const;

  // Encoded storage: the PNG/JPEG bytes of image i. Raw storage: H*W*C pixels (HWC).
  std::vector<uint8_t> image_data(int64_t i) const;
  // The same into `out` (resized; its capacity is reused, so a per-thread buffer makes
  // repeated reads allocation-free).
  void image_data(int64_t i, std::vector<uint8_t>& out) const;
  int64_t image_bytes(int64_t i) const;  // size image_data(i) will have

  std::string caption(int64_t j) const;  // UTF-8 (checked)
  std::string prompt(int64_t j) const;   // UTF-8 (checked); "" when the file has no prompts
  bool has_prompts() const { return !prompt_off_.empty(); }
  bool has_prompt(int64_t j) const { return has_prompts() && prompt_off_[size_t(j) + 1] > prompt_off_[size_t(j)]; }
  int64_t caption_image(int64_t j) const { return cap_image_[size_t(j)]; }
  bool has_tokens() const { return !tok_off_.empty(); }
  std::vector<int32_t> tokens(int64_t j) const;
  std::string tokenizer_name() const { return tokenizer_name_; }  // as stored
  // The tokenizer file the dataset names, as a path from the working directory: a
  // relative name from the dataset's folder (as `vlm data` writes it: tokenizer_name_in
  // in dataset_writer.h), else from the working directory (files written before that
  // rule); "" when the file names none or the named file exists in neither place.
  std::string tokenizer_path() const;

  // The split names an option may give (split_captions takes each; split() the first three).
  static const std::vector<std::string>& split_names() {
    static const std::vector<std::string> names{"train", "val", "test", "all"};
    return names;
  }
  // Image indices of a split: "train", "val" or "test".
  const std::vector<int64_t>& split(const std::string& name) const;
  // Caption indices whose image belongs to the split, ascending ("all" = every caption).
  std::vector<int64_t> split_captions(const std::string& name) const;

  const std::vector<int32_t>& labels() const { return labels_; }  // empty if none
  const std::vector<std::string>& class_names() const { return class_names_; }

  // Version 2: the box and the class of what caption j is about (empty when absent).
  bool has_boxes() const { return !cap_boxes_.empty(); }
  CaptionBox box(int64_t j) const;
  const std::vector<int32_t>& caption_labels() const { return cap_labels_; }
  const std::vector<std::string>& caption_class_names() const { return cap_class_names_; }

 private:
  std::vector<int64_t> read_offsets(const std::string& ds, int64_t n_plus_1, const H5Id& bytes,
                                    const std::string& bytes_name, int64_t max_one);
  std::vector<int32_t> read_i32(const std::string& ds, int64_t n);
  std::vector<std::string> read_class_names(const std::string& group);
  // labels (of a dataset) >= 0, and below n_names when there are names (the attribute names_attr).
  void check_labels(const std::vector<int32_t>& labels, int64_t n_names, const char* dataset,
                    const char* names_attr) const;
  void check_splits(const char* const names[3]) const;
  void read_caption_boxes_and_labels();
  std::string read_text(const H5Id& ds, const std::vector<int64_t>& off, int64_t j, const char* name) const;

  std::string path_;
  H5Id file_;
  bool raw_ = false;
  int64_t n_images_ = 0, version_ = 0;
  int raw_h_ = 0, raw_w_ = 0, raw_c_ = 0;
  H5Id images_, text_, prompt_, tokens_;
  std::vector<int64_t> img_off_, text_off_, prompt_off_, tok_off_, cap_image_;
  std::vector<int32_t> heights_, widths_, channels_, labels_;
  std::vector<std::string> class_names_, cap_class_names_;
  std::vector<int32_t> cap_boxes_, cap_labels_;  // [M*4] / [M]
  std::vector<int64_t> splits_[3];
  std::string source_, tokenizer_name_;
};

}  // namespace vlm

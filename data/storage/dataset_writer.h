// DatasetWriter: streams images and captions into a schema HDF5 file (schema.h), stamped
// version 1, or version 2 when it holds caption boxes or caption labels.
// Invariants:
//  - Images are numbered 0..N-1 in the order they are added; captions 0..M-1 likewise,
//    each naming an image already added.
//  - Image bytes are streamed to disk in ~4 MiB batches (memory stays bounded); captions,
//    offsets and splits are kept in memory and written by finish().
//  - The file is written under a temporary name beside `path` (io/atomic_file.h)
//    and renamed over `path` at the end of finish(); a writer destroyed without finish()
//    removes it, so a failed build leaves an existing file at `path` untouched.
//  - Captions are UTF-8 of at most schema::kMaxCaptionBytes (UserError naming `path`;
//    converters check their input first so that their messages name the input line).
//  - Token ids, when given, are given for every caption (add_caption's `tokens`); so are
//    caption boxes and caption labels (checked by finish(): one per caption, every box
//    inside its image).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/atomic_file.h"
#include "io/h5_io.h"

namespace vlm {

// The name a dataset file `dataset` stores for the tokenizer at `tokenizer` (both paths
// from the working directory): the path from the dataset's folder, so the two files can
// move together and the name holds from any working directory (DatasetReader::
// tokenizer_path reads it back); absolute where no relative path exists.
std::string tokenizer_name_in(const std::string& dataset, const std::string& tokenizer);

class DatasetWriter {
 public:
  // Encoded storage: each image is a PNG/JPEG byte string.
  static DatasetWriter encoded(const std::string& path);
  // Raw storage: every image is H x W x C uint8 (all sizes agree).
  static DatasetWriter raw(const std::string& path, int h, int w, int c);
  DatasetWriter(DatasetWriter&&) noexcept;
  ~DatasetWriter();

  // Returns the new image index. h, w, c are the decoded size (recorded for inspect and
  // for the reader's bounds).
  int64_t add_encoded(const uint8_t* bytes, size_t n, int h, int w, int c);
  int64_t add_raw(const uint8_t* pixels);  // h*w*c bytes, row-major HWC
  // `tokens` (BOS caption EOS ids) for all captions or for none; tokenizer name via
  // set_tokenizer().
  void add_caption(int64_t image, std::string_view text, std::string_view prompt = {},
                   const std::vector<int32_t>* tokens = nullptr);
  // The name /captions@tokenizer stores (tokenizer_name_in below for a path).
  void set_tokenizer(const std::string& name) { tokenizer_ = name; }
  void set_split(const std::string& path, std::vector<int64_t> images);  // schema::kSplit*
  void set_labels(std::vector<int32_t> labels, const std::vector<std::string>& class_names);
  // Schema version 2: per caption, its box x0 y0 x1 y1 ([M*4], half-open pixels of its
  // image, schema::kCapBox) and its class id in class_names (schema::kCapLabel).
  void set_caption_boxes(std::vector<int32_t> xyxy) { cap_boxes_ = std::move(xyxy); }
  void set_caption_labels(std::vector<int32_t> labels, const std::vector<std::string>& class_names);
  void set_source(const std::string& source) { source_ = source; }

  int64_t num_images() const { return n_images_; }
  int64_t num_captions() const { return int64_t(cap_image_.size()); }
  void finish();

 private:
  DatasetWriter() = default;
  void flush_images();

  std::string path_;
  std::unique_ptr<AtomicFile> out_;  // declared before file_: the file closes first
  H5Id file_;
  bool raw_ = false, finished_ = false;
  int h_ = 0, w_ = 0, c_ = 0;
  int64_t n_images_ = 0;
  std::unique_ptr<H5Appender> img_;
  std::vector<uint8_t> img_buf_;
  int64_t img_buf_rows_ = 0;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> heights_, widths_, channels_;
  std::vector<uint8_t> text_, prompt_;
  std::vector<int64_t> text_off_{0}, prompt_off_{0}, cap_image_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> splits_;
  std::vector<int32_t> labels_, cap_boxes_, cap_labels_;
  std::string class_names_, cap_class_names_, source_;
  std::vector<int32_t> tokens_;
  std::vector<int64_t> tok_off_{0};
  std::string tokenizer_;
};

// (Re)writes the optional token datasets of an existing schema-v1 file: /captions/tokens
// (i32, all captions' ids concatenated), /captions/token_offsets (i64 [M+1], from 0 to the
// number of tokens) and the attribute /captions@tokenizer. Earlier ones are unlinked
// first (HDF5 does not reclaim their space; h5repack does). The change is made on a
// copy under a temporary name, renamed over `path` when complete. The caller validates
// the file (DatasetReader) and the token counts against the schema limits.
void rewrite_caption_tokens(const std::string& path, const std::vector<int32_t>& tokens,
                            const std::vector<int64_t>& offsets, const std::string& tokenizer);

}  // namespace vlm

// Byte-level BPE tokenizer (GPT-2 / Qwen2 family) with special tokens.
// Invariants:
//  - Every byte 0..255 has a token, so any byte string encodes, and
//    decode(encode(s)) == s for every s that contains no special-token text.
//  - Merges apply in rank order (lowest first), exactly as Hugging Face `tokenizers` BPE
//    does for byte-level models without dropout.
//  - Special tokens (bos, eos, pad, image, image_start, image_end, plus any "added
//    tokens" of a loaded file) are matched literally in the text before pre-tokenisation
//    and are never produced by merges.
//  - The file format is Hugging Face tokenizer.json (the subset we need), so a trained
//    tokenizer also loads in `tokenizers`, and GPT-2/Qwen2 tokenizer.json files load here.
// Thread-safe for concurrent encode/decode (const methods touch no shared state).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/text/pretokenize.h"

namespace vlm {

class Tokenizer {
 public:
  // Names of our special tokens (added when a loaded file lacks an equivalent).
  static constexpr const char* kBos = "<|bos|>";
  static constexpr const char* kEos = "<|eos|>";
  static constexpr const char* kPad = "<|pad|>";
  static constexpr const char* kImage = "<image>";
  static constexpr const char* kImageStart = "<|image_start|>";
  static constexpr const char* kImageEnd = "<|image_end|>";

  Tokenizer();  // 256 byte tokens + our special tokens, no merges

  // Trains merges on `texts` until the vocabulary (specials included) has vocab_size
  // tokens or no pair occurs twice. Deterministic (ties: smallest pair of ids).
  static Tokenizer train(const std::vector<std::string>& texts, int vocab_size);
  // Hugging Face tokenizer.json (model.type BPE, byte-level). UserError naming the file.
  static Tokenizer load(const std::string& path);
  static Tokenizer from_json(std::string_view json, const std::string& where);
  void save(const std::string& path) const;
  std::string to_json() const;

  std::vector<int32_t> encode(std::string_view text, bool add_bos = false, bool add_eos = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const;

  int vocab_size() const { return int(tokens_.size()); }
  int bos() const { return bos_; }
  int eos() const { return eos_; }
  int pad() const { return pad_; }
  int image() const { return image_; }
  int image_start() const { return image_start_; }
  int image_end() const { return image_end_; }
  bool is_special(int id) const { return special_[size_t(id)]; }
  const std::string& token_bytes(int id) const { return tokens_[size_t(id)]; }
  int num_merges() const { return int(merges_.size()); }
  PreTokenizer pretokenizer() const { return mode_; }

 private:
  int add_token(const std::string& bytes, bool special);
  void add_merge(int a, int b);  // a+b must already be a token
  void ensure_specials();        // finds or appends bos/eos/pad/image tokens
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  // Replaces every (a, b) pair of `sym` by `id`, left to right (encoding and training).
  static void merge_pair(std::vector<int>& sym, int a, int b, int id);

  std::vector<std::string> tokens_;  // id -> bytes (specials: their text)
  std::vector<bool> special_;
  std::vector<bool> added_;  // matched literally in text (specials and added tokens)
  std::unordered_map<std::string, int> normal_ids_;  // bytes -> id, non-added tokens
  std::vector<std::pair<std::string, int>> added_list_;  // longest text first
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // (a,b) -> (rank, merged id)
  std::vector<std::pair<int, int>> merge_list_;
  int byte_id_[256];
  PreTokenizer mode_ = PreTokenizer::Gpt2;
  int max_digits_ = 1;
  int bos_ = -1, eos_ = -1, pad_ = -1, image_ = -1, image_start_ = -1, image_end_ = -1;
};

// GPT-2's byte <-> printable-unicode mapping used by tokenizer.json vocabularies.
std::string byte_to_unicode(std::string_view bytes);
// Inverse; false when a character is outside the mapping.
bool unicode_to_byte(std::string_view text, std::string* bytes);

}  // namespace vlm

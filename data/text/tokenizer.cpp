// Byte-level BPE encode/decode and the vocabulary bookkeeping (see tokenizer.h).
#include "data/text/tokenizer.h"

#include <algorithm>
#include <climits>

#include "base/error.h"

namespace vlm {

static uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

Tokenizer::Tokenizer() {
  for (int b = 0; b < 256; ++b) byte_id_[b] = add_token(std::string(1, char(b)), false);
  ensure_specials();
}

int Tokenizer::add_token(const std::string& bytes, bool special) {
  const int id = int(tokens_.size());
  tokens_.push_back(bytes);
  special_.push_back(special);
  added_.push_back(special);
  if (special) {
    added_list_.emplace_back(bytes, id);
    std::stable_sort(added_list_.begin(), added_list_.end(),
                     [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  } else {
    normal_ids_.emplace(bytes, id);
  }
  return id;
}

void Tokenizer::add_merge(int a, int b) {
  const auto it = normal_ids_.find(tokens_[size_t(a)] + tokens_[size_t(b)]);
  VLM_ASSERT(it != normal_ids_.end(), "merge result missing");
  merges_.emplace(pair_key(a, b), std::make_pair(int(merge_list_.size()), it->second));
  merge_list_.emplace_back(a, b);
}

void Tokenizer::ensure_specials() {
  auto find = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      for (const auto& [text, id] : added_list_)
        if (text == n) return id;
    return -1;
  };
  auto get = [&](int found, const char* ours) { return found >= 0 ? found : add_token(ours, true); };
  // Our names first, then the usual names of GPT-2 / Llama / Qwen2 files.
  bos_ = get(find({kBos, "<s>", "<|begin_of_text|>", "<|endoftext|>"}), kBos);
  eos_ = get(find({kEos, "</s>", "<|end_of_text|>", "<|endoftext|>"}), kEos);
  pad_ = get(find({kPad, "<pad>", "<|finetune_right_pad_id|>", "<|endoftext|>"}), kPad);
  image_ = get(find({kImage, "<|image_pad|>"}), kImage);
  image_start_ = get(find({kImageStart, "<|vision_start|>"}), kImageStart);
  image_end_ = get(find({kImageEnd, "<|vision_end|>"}), kImageEnd);
}

void Tokenizer::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int> sym;
  sym.reserve(piece.size());
  for (char ch : piece) sym.push_back(byte_id_[static_cast<unsigned char>(ch)]);
  while (sym.size() > 1) {
    int best_rank = INT_MAX, best_at = -1, best_id = -1;
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      const auto it = merges_.find(pair_key(sym[k], sym[k + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first, best_at = int(k), best_id = it->second.second;
      }
    }
    if (best_at < 0) break;
    // Merge every occurrence of the best pair, left to right (as HF does per rank).
    merge_pair(sym, sym[size_t(best_at)], sym[size_t(best_at) + 1], best_id);
  }
  out.insert(out.end(), sym.begin(), sym.end());
}

void Tokenizer::merge_pair(std::vector<int>& sym, int a, int b, int id) {
  std::vector<int> next;
  next.reserve(sym.size());
  for (size_t k = 0; k < sym.size(); ++k) {
    if (k + 1 < sym.size() && sym[k] == a && sym[k + 1] == b) {
      next.push_back(id);
      ++k;
    } else {
      next.push_back(sym[k]);
    }
  }
  sym.swap(next);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool add_eos) const {
  std::vector<int32_t> out;
  if (add_bos) out.push_back(bos_);
  size_t pos = 0, chunk = 0;
  auto flush = [&](size_t end) {
    const std::string_view part = text.substr(chunk, end - chunk);
    for (const PieceRange& r : pretokenize(part, mode_, max_digits_))
      bpe(part.substr(r.begin, r.end - r.begin), out);
  };
  while (pos < text.size()) {
    int hit = -1;
    size_t len = 0;
    // Special texts all start with '<' in practice, but check generally.
    for (const auto& [s, id] : added_list_)
      if (!s.empty() && text.compare(pos, s.size(), s) == 0) {
        hit = id, len = s.size();
        break;  // longest first
      }
    if (hit < 0) {
      ++pos;
      continue;
    }
    flush(pos);
    out.push_back(hit);
    pos += len;
    chunk = pos;
  }
  flush(text.size());
  if (add_eos) out.push_back(eos_);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string s;
  for (int32_t id : ids) {
    VLM_REQUIRE(id >= 0 && id < vocab_size(), "token id ", id, " out of range (vocab ", vocab_size(), ")");
    if (skip_special && special_[size_t(id)]) continue;
    s += tokens_[size_t(id)];
  }
  return s;
}

// GPT-2: printable bytes map to themselves, the other 68 to U+0100.. in byte order.
static const std::vector<uint32_t>& byte_cps() {
  static const std::vector<uint32_t> t = [] {
    std::vector<uint32_t> v(256);
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      v[b] = keep ? b : 256 + extra++;
    }
    return v;
  }();
  return t;
}

std::string byte_to_unicode(std::string_view bytes) {
  std::string out;
  for (char ch : bytes) {
    const uint32_t cp = byte_cps()[static_cast<unsigned char>(ch)];
    if (cp < 0x80) out += char(cp);
    else {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

bool unicode_to_byte(std::string_view text, std::string* bytes) {
  static const std::vector<int> inv = [] {
    std::vector<int> v(512, -1);
    for (int b = 0; b < 256; ++b) v[byte_cps()[size_t(b)]] = b;
    return v;
  }();
  bytes->clear();
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    if (c < 0x80) cp = c, i += 1;
    else if ((c >> 5) == 6 && i + 1 < text.size()) {
      cp = (uint32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      i += 2;
    } else return false;
    if (cp >= 512 || inv[cp] < 0) return false;
    *bytes += char(inv[cp]);
  }
  return true;
}

}  // namespace vlm

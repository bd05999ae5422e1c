// BPE training (Tokenizer::train): classic Sennrich-style merge learning on the
// pre-tokenised (GPT-2 style) pieces of the training texts.
// Invariants: deterministic for the same texts (pieces are counted in a sorted map; the
// most frequent pair wins, ties go to the smallest (left id, right id)); a merge is only
// learned if its pair occurs at least twice; vocabulary = 256 bytes + merges + specials.
// Cost: O(merges x total symbols of the distinct pieces); fine for caption corpora of up
// to a few hundred thousand distinct words.
#include <map>

#include "base/error.h"
#include "data/text/tokenizer.h"

namespace vlm {

Tokenizer Tokenizer::train(const std::vector<std::string>& texts, int vocab_size) {
  Tokenizer t;
  const int n_special = t.vocab_size() - 256;
  VLM_REQUIRE(vocab_size >= 256 + n_special, "tokenizer vocab size ", vocab_size, " is below the ",
              256 + n_special, " byte and special tokens");

  std::map<std::string, int64_t> counts;
  for (const std::string& s : texts)
    for (const PieceRange& r : pretokenize(s, PreTokenizer::Gpt2))
      counts[s.substr(r.begin, r.end - r.begin)]++;
  std::vector<std::vector<int>> words;
  std::vector<int64_t> freq;
  for (const auto& [w, c] : counts) {
    std::vector<int> sym;
    for (char ch : w) sym.push_back(t.byte_id_[static_cast<unsigned char>(ch)]);
    if (sym.size() > 1) words.push_back(std::move(sym)), freq.push_back(c);
  }

  // Specials are re-added after the merges so that ids stay: bytes, merges, specials.
  std::vector<std::string> specials;
  for (int id = 256; id < t.vocab_size(); ++id) specials.push_back(t.tokens_[size_t(id)]);
  t.tokens_.resize(256);
  t.special_.resize(256);
  t.added_.resize(256);
  t.added_list_.clear();

  const int target_merges = vocab_size - 256 - n_special;
  std::map<std::pair<int, int>, int64_t> pairs;
  for (int m = 0; m < target_merges; ++m) {
    pairs.clear();
    for (size_t w = 0; w < words.size(); ++w)
      for (size_t k = 0; k + 1 < words[w].size(); ++k) pairs[{words[w][k], words[w][k + 1]}] += freq[w];
    std::pair<int, int> best{-1, -1};
    int64_t best_count = 1;
    for (const auto& [p, c] : pairs)
      if (c > best_count) best = p, best_count = c;  // map order: ties keep the smallest pair
    if (best.first < 0) break;
    const std::string merged = t.tokens_[size_t(best.first)] + t.tokens_[size_t(best.second)];
    int id;
    if (const auto it = t.normal_ids_.find(merged); it != t.normal_ids_.end()) id = it->second;
    else id = t.add_token(merged, false);
    t.add_merge(best.first, best.second);
    for (auto& w : words) merge_pair(w, best.first, best.second, id);
  }
  for (const std::string& s : specials) t.add_token(s, true);
  t.ensure_specials();
  return t;
}

}  // namespace vlm

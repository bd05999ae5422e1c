// Pre-tokenisation for byte-level BPE: splits text into pieces the way the GPT-2 and
// Qwen2/Llama-3 regexes do, implemented by hand (std::regex has no \p{L}).
//   gpt2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   qwen2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
//          | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+     (D = 1 Qwen2, 3 Llama-3)
// Invariant: the pieces are consecutive byte ranges that concatenate to the input.
// Approximation (documented in docs/dataset-format.md, "Tokenizer"): Unicode classes come from
// a table of ranges (unicode_class.cpp): ASCII exact; Latin-1, general punctuation,
// symbols, arrows, box drawing, CJK punctuation, full-width forms, emoji, common digit
// blocks and the main combining-mark blocks are classified; every other code point
// >= U+0080 counts as a letter. Invalid UTF-8 bytes count as single "other" characters.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vlm {

enum class CharClass : uint8_t { Letter, Number, Space, Other };
CharClass char_class(uint32_t cp);

enum class PreTokenizer : uint8_t { Gpt2, Qwen2 };

struct PieceRange {
  size_t begin, end;  // bytes [begin, end)
};

// max_digits only applies to Qwen2 (1 for Qwen2, 3 for Llama-3).
std::vector<PieceRange> pretokenize(std::string_view text, PreTokenizer mode, int max_digits = 1);

}  // namespace vlm

// UTF-8 validation of text that the project stores as UTF-8 (captions, prompts): the
// Unicode rules (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing
// above U+10FFFF, no truncated sequence. NUL is valid UTF-8.
#pragma once
#include <cstddef>
#include <string_view>

namespace vlm {

inline constexpr size_t kUtf8Valid = size_t(-1);

// The byte offset of the first invalid sequence of `s`, or kUtf8Valid.
size_t utf8_invalid_at(std::string_view s);

// UserError "<what> is not valid UTF-8 at byte N of M (expected UTF-8 text)" unless `s`
// is valid; `what` names the text (the file, dataset and caption index, or the option).
void require_utf8(std::string_view s, std::string_view what);

}  // namespace vlm

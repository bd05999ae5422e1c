// UTF-8 validation (see utf8.h), a byte-at-a-time decoder of the RFC 3629 table.
#include "base/utf8.h"

#include <cstdint>

#include "base/error.h"

namespace vlm {

size_t utf8_invalid_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    int n = 0;
    uint32_t cp = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0) n = 1, cp = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0) n = 2, cp = b0 & 0x0F, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0) n = 3, cp = b0 & 0x07, min = 0x10000;
    else return i;  // a continuation byte or 0xF8..0xFF as a lead
    if (i + size_t(n) >= s.size()) return i;  // truncated
    for (int k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += size_t(n) + 1;
  }
  return kUtf8Valid;
}

void require_utf8(std::string_view s, std::string_view what) {
  const size_t bad = utf8_invalid_at(s);
  VLM_REQUIRE(bad == kUtf8Valid, what, " is not valid UTF-8 at byte ", bad, " of ", s.size(), " (expected UTF-8 text)");
}

}  // namespace vlm

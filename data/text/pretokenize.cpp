// Hand-written equivalents of the GPT-2 and Qwen2 pre-tokenisation regexes
// (pretokenize.h). Each branch below is one alternative of the regex, tried in the
// regex's order at the current position; the first that matches wins.
#include "data/text/pretokenize.h"

namespace vlm {

namespace {
struct Cp {
  uint32_t cp;
  size_t byte;  // start byte of this code point
  CharClass cls;
};

// Decodes UTF-8; an invalid or truncated sequence yields one Other per byte.
std::vector<Cp> decode(std::string_view s) {
  std::vector<Cp> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + size_t(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((c >> 6) != 2) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back({b, i, CharClass::Other});
      ++i;
      continue;
    }
    out.push_back({cp, i, char_class(cp)});
    i += size_t(len);
  }
  return out;
}

bool is_nl(uint32_t cp) { return cp == '\r' || cp == '\n'; }
uint32_t lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

// Length (in code points) of a contraction at i, or 0.
size_t contraction(const std::vector<Cp>& c, size_t i, bool ignore_case) {
  if (c[i].cp != '\'' || i + 1 >= c.size()) return 0;
  auto at = [&](size_t k) { return k < c.size() ? (ignore_case ? lower(c[k].cp) : c[k].cp) : 0u; };
  const uint32_t a = at(i + 1), b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

size_t run(const std::vector<Cp>& c, size_t i, CharClass cls) {
  while (i < c.size() && c[i].cls == cls) ++i;
  return i;
}

// End of the whitespace alternatives (\s+(?!\S) | \s+) at a whitespace position i.
size_t space_end(const std::vector<Cp>& c, size_t i) {
  const size_t k = run(c, i, CharClass::Space);
  if (k == c.size() || k - i == 1) return k;
  return k - 1;  // leave the last space to prefix the next word
}
}  // namespace

std::vector<PieceRange> pretokenize(std::string_view text, PreTokenizer mode, int max_digits) {
  const std::vector<Cp> c = decode(text);
  std::vector<PieceRange> out;
  const size_t n = c.size();
  auto byte_at = [&](size_t k) { return k < n ? c[k].byte : text.size(); };
  auto cls = [&](size_t k) { return k < n ? c[k].cls : CharClass::Space; };
  size_t i = 0;
  while (i < n) {
    size_t e = 0;
    if (mode == PreTokenizer::Gpt2) {
      if (size_t k = contraction(c, i, false)) e = i + k;
      else {
        // " ?X+" for X in {L, N, Other}: an optional single ' ' then a run of one class.
        size_t j = (c[i].cp == ' ' && i + 1 < n && cls(i + 1) != CharClass::Space) ? i + 1 : i;
        if (cls(j) != CharClass::Space) e = run(c, j, cls(j));
        else e = space_end(c, i);
      }
    } else {
      const CharClass ci = c[i].cls;
      if (size_t k = contraction(c, i, true)) e = i + k;
      else if (ci == CharClass::Letter) e = run(c, i, CharClass::Letter);
      else if (ci != CharClass::Number && !is_nl(c[i].cp) && cls(i + 1) == CharClass::Letter)
        e = run(c, i + 1, CharClass::Letter);
      else if (ci == CharClass::Number) {
        e = i;
        while (e < n && c[e].cls == CharClass::Number && int(e - i) < max_digits) ++e;
      } else if (ci == CharClass::Other || (c[i].cp == ' ' && cls(i + 1) == CharClass::Other)) {
        const size_t j = ci == CharClass::Other ? i : i + 1;
        e = run(c, j, CharClass::Other);
        while (e < n && is_nl(c[e].cp)) ++e;
      } else {
        // whitespace: \s*[\r\n]+ first (up to the last newline of the run), then \s+(?!\S), \s+
        const size_t k = run(c, i, CharClass::Space);
        size_t last_nl = n;
        for (size_t m = i; m < k; ++m)
          if (is_nl(c[m].cp)) last_nl = m;
        e = last_nl != n ? last_nl + 1 : space_end(c, i);
      }
    }
    out.push_back({byte_at(i), byte_at(e)});
    i = e;
  }
  return out;
}

}  // namespace vlm

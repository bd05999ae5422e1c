// one_line() of UserError messages and the internal-invariant failure path (see error.h).
#include "base/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "base/utf8.h"

namespace vlm {

std::string one_line(const std::string& msg) {
  std::string out;
  out.reserve(std::min(msg.size(), kMaxUserErrorBytes + 3));
  for (size_t i = 0; i < msg.size(); ++i) {
    const auto c = static_cast<unsigned char>(msg[i]);
    if (c == '\n' || c == '\r') {
      while (i + 1 < msg.size() && (msg[i + 1] == '\n' || msg[i + 1] == '\r' || msg[i + 1] == ' ' || msg[i + 1] == '\t')) ++i;
      if (i + 1 < msg.size() && !out.empty()) out += "; ";
    } else if (c == '\t') {
      out += ' ';
    } else {
      out += c < 0x20 || c == 0x7F ? '?' : char(c);
    }
  }
  if (out.size() > kMaxUserErrorBytes) {
    size_t cut = kMaxUserErrorBytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    out.resize(cut);
    out += "...";
  }
  // Bytes that are not UTF-8 (a binary file quoted in the message) become '?' too.
  std::string text;
  for (std::string_view rest(out);;) {
    const size_t bad = utf8_invalid_at(rest);
    if (bad == kUtf8Valid) return text.append(rest);
    text.append(rest.substr(0, bad)).push_back('?');
    rest.remove_prefix(bad + 1);
  }
}

void vlm_check_failed(const char* what, const char* expr, const std::string& detail,
                      const char* file, int line) {
  std::fprintf(stderr, "vlm: %s failed: %s%s%s at %s:%d\n", what, expr,
               detail.empty() ? "" : " (", detail.empty() ? "" : (detail + ")").c_str(), file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace vlm

// The non-template part of OptionSet (base/options.h).
#include "base/options.h"

#include <charconv>
#include <cstdlib>

namespace vlm::options_detail {

double decimal_of(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf - 1, f);  // the shortest text that reads back as f
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

}  // namespace vlm::options_detail

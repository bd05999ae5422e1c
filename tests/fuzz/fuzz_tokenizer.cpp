// Fuzz target: a tokenizer.json (data/text/tokenizer.h) loaded, then used: a fixed text
// with special-token texts encoded and decoded, and written back as JSON.
#include <string_view>

#include "data/text/tokenizer.h"
#include "fuzz_util.h"

using namespace vlm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::refusal_allowed([&] {
    const Tokenizer t = Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const std::vector<int32_t> ids = t.encode("Hello world 12345 <image><|endoftext|> caf\xC3\xA9 \xF0\x9F\x98\x80!", true, true);
    (void)t.decode(ids, false);
    (void)t.to_json();
  });
  return 0;
}

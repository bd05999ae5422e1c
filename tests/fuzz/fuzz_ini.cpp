// Fuzz target: the Config reader (base/config.h). The first byte picks the input kind:
// even = an INI file read with read_ini (via --config), odd = command-line words, one
// per line, given to parse(). Options of every kind are registered, with sections,
// ranges, choices, flags, lists and an alias.
#include <vector>

#include "base/config.h"
#include "fuzz_util.h"

using namespace vlm;

namespace {
void register_all(Config& c) {
  c.add_choice("device", "auto", {"auto", "cpu", "cuda"}, "device");
  c.add_int("seed", 1234, "seed", 0, INT64_MAX);
  c.add_int("parallel.tp", 1, "tp", 1, 1 << 16);
  c.add_float("parallel.timeout_s", 300.0, "timeout", 0.001, 1e7);
  c.add_string("data.out", "", "output");
  c.add_choice("data.from", "", {"", "jsonl", "llava"}, "source");
  c.add_flag("data.allow_outside_images", false, "flag");
  c.add_int_list("ids", "", "ids", 0, INT32_MAX);
  c.add_float("model.vision.lr", 1e-3, "nested section", 0, 1);
  c.add_alias("tp", "parallel.tp");
  c.allow_positionals(1, "FILE");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Config c("vlm fuzz");
  register_all(c);
  fuzz::refusal_allowed([&] {
    if (data[0] % 2 == 0) {
      const std::string path = fuzz::scratch("x.cfg");
      fuzz::write_bytes(path, text.data(), text.size());
      c.read_ini(path);
    } else {
      std::vector<std::string> words{"vlm"};
      size_t pos = 0;
      while (pos <= text.size() && words.size() < 64) {
        const size_t nl = std::min(text.find('\n', pos), text.size());
        words.push_back(text.substr(pos, nl - pos));
        pos = nl + 1;
      }
      std::vector<const char*> argv;
      for (const auto& w : words)
        if (w != "--help" && w != "-h") argv.push_back(w.c_str());  // help prints and returns
      c.parse(int(argv.size()), argv.data());
    }
    (void)c.dump_ini();
  });
  return 0;
}

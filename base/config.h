// Config: every option registered once under a dotted name (`model.d_model`,
// `train.lr`), read from INI files (`[model]\nd_model = 768`, via --config FILE, may be
// given several times, later files win) and from the command line
// (`--model.d_model 768` or `--model.d_model=768`); the command line wins over files.
// `--help` lists every option with its default and help text.
// Unknown keys and bad or out-of-range values raise UserError naming the key and,
// for INI files, file:line.  Built on Boost.Program_options.
// INI files: at most kMaxIniBytes (an endless input such as /dev/zero is refused), no
// NUL bytes; a value that starts with a double quote ends at the last double quote of
// its line, and a missing closing quote is an error (docs/configuration.md, "INI files").
// Modules do not call add_* and get_* by name: they declare their options once in an
// OptionSet (base/options.h), which registers and reads them through these.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vlm {

inline constexpr uint64_t kMaxIniBytes = uint64_t(4) << 20;

class Config {
 public:
  explicit Config(std::string program = "vlm", std::string usage = "");
  ~Config();
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;

  // Registration (each name once; a second registration is an internal error).
  // Ranges are inclusive. A flag is a bool that `--name` alone sets to true.
  void add_int(const std::string& name, int64_t def, const std::string& help,
               int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  void add_float(const std::string& name, double def, const std::string& help,
                 double lo = -1e300, double hi = 1e300);
  void add_string(const std::string& name, const std::string& def, const std::string& help);
  void add_choice(const std::string& name, const std::string& def,
                  const std::vector<std::string>& choices, const std::string& help);
  void add_flag(const std::string& name, bool def, const std::string& help);
  // Comma-separated list of ints, e.g. "1,2,3" (empty string = empty list); every
  // element must lie in [lo, hi].
  void add_int_list(const std::string& name, const std::string& def, const std::string& help,
                    int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
  // A short command-line spelling of a registered option: add_alias("tp", "parallel.tp")
  // makes `--tp 8` set parallel.tp (INI files use the full name). Shown in --help.
  void add_alias(const std::string& alias, const std::string& name);

  // Declares that the command takes up to `max_count` positional arguments (words not
  // starting with --), shown as `meta` in messages ("FILE"). Without it a command takes
  // none, so a stray word is refused rather than silently ignored.
  void allow_positionals(int max_count, const std::string& meta);

  // Parses the command line (argv[0] is skipped) and every --config file it names.
  // Positional arguments are collected in positional(); more than allow_positionals()
  // declared is a UserError naming the first extra word.
  // Throws UserError on any problem. Returns false when --help was given (help() was
  // printed to stdout); the caller then exits 0.
  bool parse(int argc, const char* const* argv);
  // Reads one INI file (as --config does); values do not override the command line.
  void read_ini(const std::string& path);
  // The same for INI text held in memory (a checkpoint's /config); `source` names it in
  // messages as the path would.
  void read_ini_text(const std::string& text, const std::string& source);

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;  // also choices
  bool get_flag(const std::string& name) const;
  std::vector<int64_t> get_int_list(const std::string& name) const;
  // True when the value came from a file or the command line, not the default.
  bool is_set(const std::string& name) const;
  // True when `name` was registered (shared code reading optional options).
  bool has(const std::string& name) const;
  const std::vector<std::string>& positional() const;
  const std::string& program() const;  // as constructed ("vlm train")
  // The INI files read (--config, read_ini), in order: inputs an output must not replace.
  const std::vector<std::string>& files() const;

  std::string help() const;  // usage + every option grouped by section, with defaults
  // "key = value" lines of every option, grouped as INI sections (for logs/checkpoints).
  // set_only: only the options whose value came from a file or the command line, so that
  // the text read back leaves the others unset (is_set) and every value a command derives
  // from an unset option (model.vocab_size from the tokenizer, vision.* from vision.hf)
  // is derived again.
  std::string dump_ini(bool set_only = false) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vlm

// Config (base/config.h) on Boost.Program_options: each registered option gets a Boost
// typed value semantic (int64_t, double, bool, string) that parses every raw value;
// ranges, choices and int lists are checked here. INI files are read by a small line
// reader of our own so that every error names file:line and the key (bounded read,
// quoting rule: config.h).
// Precedence: each value carries the rank of its source (0 default, 1.. files in the
// order read, kCliRank the command line); a value replaces another only when its rank
// is not lower, so later files win and the command line wins over every file.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/config_impl.h"
#include "base/file_read.h"

namespace vlm {
namespace config_detail {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Levenshtein distance.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace config_detail

// One INI line after comment removal: "", "[section]" or "key = value" (value unquoted).
// Quotes count only at the start of a value: it then ends at the last '"' of the line,
// after which only a comment may follow. Elsewhere '#' or ';' after a space starts a
// comment (comment_at).
void Config::Impl::read_ini(const std::string& path) {
  files.push_back(path);
  std::error_code ec;
  VLM_REQUIRE(!std::filesystem::is_directory(path, ec), "cannot open config file '", path, "': is a directory");
  VLM_REQUIRE(::access(path.c_str(), R_OK) == 0, "cannot open config file '", path, "': ", std::strerror(errno));
  read_ini_text(read_file_bounded(path, kMaxIniBytes, "config file"), path);
}

void Config::Impl::read_ini_text(const std::string& text, const std::string& path) {
  VLM_REQUIRE(text.size() <= kMaxIniBytes, path, ": more than ", kMaxIniBytes, " bytes of INI text");
  const size_t nul = text.find('\0');
  const int rank = ++files_read;
  std::map<std::string, int> seen;  // key -> line, to reject a key set twice in one file
  std::string section;
  size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte-order mark (Windows editors)
  for (int lineno = 1; pos < text.size(); ++lineno) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    const std::string at = cat(path, ":", lineno, ":");
    VLM_REQUIRE(nul == std::string::npos || nul >= nl || nul < pos, at, " NUL byte (not a text file?)");
    pos = nl + 1;
    const size_t eq = line.find('='), first = line.find_first_not_of(" \t\r");
    const size_t open = eq == std::string::npos ? eq : line.find_first_not_of(" \t", eq + 1);
    const bool quoted = open != std::string::npos && line[open] == '"' && line[first] != '#' &&
                        line[first] != ';' && line[first] != '[';
    std::string quoted_value;
    if (quoted) {
      const std::string key = trim(line.substr(0, eq));
      const size_t close = line.rfind('"');
      VLM_REQUIRE(close > open, at, " unterminated quote in the value of '", key,
                  "' (a value that starts with \" must end with \" on the same line)");
      const std::string after = trim(line.substr(close + 1));
      VLM_REQUIRE(after.empty() || ((after[0] == '#' || after[0] == ';') && comment_at(line, line.find(after[0], close))),
                  at, " unexpected '", after, "' after the closing quote of the value of '", key, "'");
      quoted_value = line.substr(open + 1, close - open - 1);
      line.resize(eq + 1);
    } else {
      for (size_t p = 0; p < line.size(); ++p)
        if (comment_at(line, p)) {
          line.resize(p);
          break;
        }
    }
    std::string s = trim(line);
    if (s.empty()) continue;
    if (s[0] == '[') {
      VLM_REQUIRE(s.back() == ']' && s.size() > 2, at, " expected '[section]', got '", s, "'");
      section = trim(s.substr(1, s.size() - 2));
      const std::string prefix = section + ".";
      const bool known = std::any_of(opts.begin(), opts.end(), [&](const Opt& o) { return o.name.rfind(prefix, 0) == 0; });
      VLM_REQUIRE(known, at, " unknown section '[", section, "]' (no option of this command starts with '", prefix,
                  "')");
      continue;
    }
    const size_t e = s.find('=');
    VLM_REQUIRE(e != std::string::npos && e > 0, at, " expected 'key = value' or '[section]', got '", s, "'");
    std::string key = trim(s.substr(0, e)), raw = quoted ? quoted_value : trim(s.substr(e + 1));
    if (!section.empty()) key = section + "." + key;
    Opt* o = find(key);
    VLM_REQUIRE(o, at, " unknown option '", key, "' (did you mean '", closest(key), "'?)");
    VLM_REQUIRE(!seen.count(key), at, " '", key, "' is already set on line ", seen[key]);
    seen[key] = lineno;
    apply(*o, raw, cat(at, " ", key, " ="), rank);
  }
}

Config::Config(std::string program, std::string usage) : impl_(std::make_unique<Impl>()) {
  impl_->program = std::move(program);
  impl_->usage = std::move(usage);
}
Config::~Config() = default;

void Config::add_int(const std::string& name, int64_t def, const std::string& help, int64_t lo, int64_t hi) {
  VLM_ASSERT(lo <= def && def <= hi, "default of '", name, "' out of its range");
  Opt& o = impl_->add(name, Kind::Int, help, po::value<int64_t>());
  o.ilo = lo, o.ihi = hi, o.value = def;
}
void Config::add_float(const std::string& name, double def, const std::string& help, double lo, double hi) {
  VLM_ASSERT(lo <= def && def <= hi, "default of '", name, "' out of its range");
  Opt& o = impl_->add(name, Kind::Float, help, po::value<double>());
  o.flo = lo, o.fhi = hi, o.value = def;
}
void Config::add_string(const std::string& name, const std::string& def, const std::string& help) {
  impl_->add(name, Kind::String, help, po::value<std::string>()).value = def;
}
void Config::add_choice(const std::string& name, const std::string& def, const std::vector<std::string>& choices,
                        const std::string& help) {
  VLM_ASSERT(std::find(choices.begin(), choices.end(), def) != choices.end(), "default of '", name, "' not a choice");
  Opt& o = impl_->add(name, Kind::Choice, help, po::value<std::string>());
  o.choices = choices, o.value = def;
}
void Config::add_flag(const std::string& name, bool def, const std::string& help) {
  impl_->add(name, Kind::Flag, help, po::value<bool>()).value = def;
}
void Config::add_int_list(const std::string& name, const std::string& def, const std::string& help, int64_t lo,
                          int64_t hi) {
  VLM_ASSERT(lo <= hi, "range of '", name, "' is empty");
  Opt& o = impl_->add(name, Kind::IntList, help, po::value<std::string>());
  o.ilo = lo, o.ihi = hi;
  o.value = impl_->convert(o, def, "default of --" + name + ":");
}

void Config::allow_positionals(int max_count, const std::string& meta) {
  VLM_ASSERT(max_count >= 0, "allow_positionals(", max_count, ")");
  impl_->max_positional = max_count;
  impl_->positional_meta = meta;
}

void Config::add_alias(const std::string& alias, const std::string& name) {
  Opt* o = impl_->find(name);
  VLM_ASSERT(o, "alias '", alias, "' of unregistered option '", name, "'");
  VLM_ASSERT(!impl_->find_cli(alias) && alias != "config" && alias != "help", "alias '", alias, "' is taken");
  o->aliases.push_back(alias);
}

bool Config::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
  std::vector<std::string> files;  // read after the command line, in order
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) impl_->positional.push_back(argv[i]);
      break;
    }
    if (a.size() < 2 || a[0] != '-' || std::isdigit((unsigned char)a[1]) || a[1] == '.') {
      impl_->positional.push_back(a);  // a word or a negative number
      continue;
    }
    VLM_REQUIRE(a.compare(0, 2, "--") == 0, "unknown option '", a, "' (options are --name value or --name=value)");
    size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2), value;
    Opt* o = impl_->find_cli(name);
    VLM_REQUIRE(o || name == "config", "unknown option '--", name, "' (did you mean '--", impl_->closest(name), "'?)");
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (o && o->kind == Kind::Flag) {
      value = "true";  // a flag alone sets it and never takes the next word
    } else {
      VLM_REQUIRE(i + 1 < argc, "--", name, ": missing value");
      value = argv[++i];
    }
    if (o) impl_->apply(*o, value, "--" + name + ":", kCliRank);
    else files.push_back(value);
  }
  const auto& pos = impl_->positional;
  if (int(pos.size()) > impl_->max_positional) {
    const std::string& extra = pos[size_t(impl_->max_positional)];
    if (impl_->max_positional == 0)
      throw UserError(cat("unexpected argument '", extra, "' (", impl_->program,
                          " takes no positional arguments; options are --name value, see --help)"));
    throw UserError(cat("unexpected argument '", extra, "' (", impl_->program, " takes at most ",
                        impl_->max_positional, " ", impl_->positional_meta, " argument",
                        impl_->max_positional > 1 ? "s" : "", ")"));
  }
  for (const auto& f : files) impl_->read_ini(f);
  return true;
}

void Config::read_ini(const std::string& path) { impl_->read_ini(path); }
void Config::read_ini_text(const std::string& text, const std::string& source) { impl_->read_ini_text(text, source); }

int64_t Config::get_int(const std::string& n) const { return impl_->get<int64_t>(n, Kind::Int); }
double Config::get_float(const std::string& n) const { return impl_->get<double>(n, Kind::Float); }
const std::string& Config::get_string(const std::string& n) const { return impl_->get<std::string>(n, Kind::String); }
bool Config::get_flag(const std::string& n) const { return impl_->get<bool>(n, Kind::Flag); }
std::vector<int64_t> Config::get_int_list(const std::string& n) const {
  return impl_->get<std::vector<int64_t>>(n, Kind::IntList);
}
bool Config::is_set(const std::string& n) const {
  VLM_ASSERT(impl_->find(n), "option '", n, "' was never registered");
  return impl_->find(n)->rank > 0;
}
bool Config::has(const std::string& n) const { return impl_->find(n) != nullptr; }
const std::vector<std::string>& Config::positional() const { return impl_->positional; }
const std::vector<std::string>& Config::files() const { return impl_->files; }
const std::string& Config::program() const { return impl_->program; }


}  // namespace vlm

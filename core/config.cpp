// Config (core/config.h) on Boost.Program_options: each registered option gets a Boost
// typed value semantic (int64_t, double, bool, string) that parses every raw value;
// ranges, choices and int lists are checked here. INI files are read by a small line
// reader of our own so that every error names file:line and the key.
// Precedence: each value carries the rank of its source (0 default, 1.. files in the
// order read, kCliRank the command line); a value replaces another only when its rank
// is not lower, so later files win and the command line wins over every file.
#include "core/config.h"

#include <algorithm>
#include <boost/any.hpp>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace po = boost::program_options;

namespace vlm {
namespace {

constexpr int kCliRank = 1 << 30;
enum class Kind { Int, Float, String, Choice, Flag, IntList };
const char* const kNoun[] = {"an integer", "a number", "a string", "a choice",
                             "a boolean (true/false, yes/no, on/off, 1/0)", "a string"};
const char* const kMeta[] = {" INT", " FLOAT", " STR", "", "", " INT,INT,..."};

struct Opt {
  std::string name, help;
  Kind kind = Kind::String;
  int64_t ilo = INT64_MIN, ihi = INT64_MAX;
  double flo = -1e300, fhi = 1e300;
  std::vector<std::string> choices;
  boost::any value;  // int64_t, double, std::string, bool or std::vector<int64_t>
  int rank = 0;      // source of `value` (see the file comment)
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Shortest %g form (6 to 17 digits) that reads back to the same double.
std::string fmt_float(double v) {
  char buf[40];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

template <typename T>
std::string join(const std::vector<T>& v, const char* sep) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? sep : "") << v[i];
  return os.str();
}

// "[lo, hi]" of an int or float option; "" when it has the full default range.
std::string range_of(const Opt& o) {
  if (o.kind == Kind::Int && (o.ilo != INT64_MIN || o.ihi != INT64_MAX)) return cat("[", o.ilo, ", ", o.ihi, "]");
  if (o.kind == Kind::Float && (o.flo != -1e300 || o.fhi != 1e300))
    return cat("[", fmt_float(o.flo), ", ", fmt_float(o.fhi), "]");
  return "";
}

std::string fmt_value(const Opt& o) {
  switch (o.kind) {
    case Kind::Int: return std::to_string(boost::any_cast<int64_t>(o.value));
    case Kind::Float: return fmt_float(boost::any_cast<double>(o.value));
    case Kind::Flag: return boost::any_cast<bool>(o.value) ? "true" : "false";
    case Kind::IntList: return join(boost::any_cast<const std::vector<int64_t>&>(o.value), ",");
    default: return boost::any_cast<const std::string&>(o.value);
  }
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

// The section of a dotted name ("model.vision.width" -> "model.vision"; "seed" -> "").
std::string section_of(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

}  // namespace

struct Config::Impl {
  std::string program, usage;
  po::options_description desc;  // the Boost value semantics, one per option
  std::vector<Opt> opts;         // registration order (a few hundred at most: found by a scan)
  std::vector<std::string> positional;
  int files_read = 0;

  Opt& add(const std::string& name, Kind kind, const std::string& help, const po::value_semantic* sem) {
    VLM_ASSERT(!name.empty() && name.find_first_of(" =[]#;\"") == std::string::npos, "bad option name '", name, "'");
    VLM_ASSERT(name != "config" && name != "help", "option name '", name, "' is reserved");
    VLM_ASSERT(!find(name), "option '", name, "' registered twice");
    desc.add_options()(name.c_str(), sem, help.c_str());
    Opt& o = opts.emplace_back();
    o.name = name, o.kind = kind, o.help = help;
    return o;
  }

  Opt* find(const std::string& name) {
    auto it = std::find_if(opts.begin(), opts.end(), [&](const Opt& o) { return o.name == name; });
    return it == opts.end() ? nullptr : &*it;
  }
  // The value of a registered option of the given kind (else a bug, not user input).
  template <typename T>
  const T& get(const std::string& name, Kind kind) {
    const Opt* o = find(name);
    VLM_ASSERT(o, "option '", name, "' was never registered");
    VLM_ASSERT(o->kind == kind || (kind == Kind::String && o->kind == Kind::Choice), "'", name, "' read as wrong type");
    return boost::any_cast<const T&>(o->value);
  }

  std::string closest(const std::string& name) const {  // for "did you mean"
    auto far = [&](const Opt& a, const Opt& b) { return edit_distance(name, a.name) < edit_distance(name, b.name); };
    return opts.empty() ? "" : std::min_element(opts.begin(), opts.end(), far)->name;
  }

  // Parses `raw` with the option's Boost semantic, then checks range/choice/list.
  // Errors read "<where> <problem>", where = "--name:" or "file:line: name =".
  boost::any convert(const Opt& o, const std::string& raw, const std::string& where) const {
    auto bad = [&](const std::string& problem) { return UserError(where + " " + problem); };
    boost::any v;
    try {
      desc.find(o.name, false).semantic()->parse(v, {raw}, true);
    } catch (const po::error&) {
      throw bad(cat("'", raw, "' is not ", kNoun[int(o.kind)]));
    }
    if (o.kind == Kind::Int) {
      int64_t x = boost::any_cast<int64_t>(v);
      if (x < o.ilo || x > o.ihi) throw bad(cat(x, " is out of range ", range_of(o)));
    } else if (o.kind == Kind::Float) {
      double x = boost::any_cast<double>(v);
      if (!(x >= o.flo && x <= o.fhi))  // also rejects NaN
        throw bad(cat(raw, " is out of range ", range_of(o)));
    } else if (o.kind == Kind::Choice) {
      if (std::find(o.choices.begin(), o.choices.end(), raw) == o.choices.end())
        throw bad(cat("'", raw, "' is not one of ", join(o.choices, ", ")));
    } else if (o.kind == Kind::IntList) {
      std::vector<int64_t> list;
      std::stringstream ss(raw);
      std::string item;
      try {
        while (!trim(raw).empty() && std::getline(ss, item, ',')) list.push_back(boost::lexical_cast<int64_t>(trim(item)));
        if (!raw.empty() && raw.back() == ',') throw boost::bad_lexical_cast();
      } catch (const boost::bad_lexical_cast&) {
        throw bad(cat("'", raw, "' is not a comma-separated list of integers"));
      }
      v = list;
    }
    return v;
  }

  // Stores raw into o unless o holds a value from a source of higher rank.
  void apply(Opt& o, const std::string& raw, const std::string& where, int rank) {
    boost::any v = convert(o, raw, where);
    if (rank >= o.rank) o.value = v, o.rank = rank;
  }

  void read_ini(const std::string& path) {
    std::error_code ec;
    VLM_REQUIRE(!std::filesystem::is_directory(path, ec), "cannot open config file '", path, "': is a directory");
    std::ifstream in(path);
    VLM_REQUIRE(in, "cannot open config file '", path, "': ", std::strerror(errno));
    const int rank = ++files_read;
    std::map<std::string, int> seen;  // key -> line, to reject a key set twice in one file
    std::string line, section;
    for (int lineno = 1; std::getline(in, line); ++lineno) {
      const std::string at = cat(path, ":", lineno, ":");
      // Comments: a line starting with # or ;, or " #"/" ;" after a value (not inside "...").
      bool quoted = false;
      for (size_t p = 0; p < line.size(); ++p) {
        if (line[p] == '"') quoted = !quoted;
        if (!quoted && (line[p] == '#' || line[p] == ';') && (p == 0 || line[p - 1] == ' ' || line[p - 1] == '\t')) {
          line.resize(p);
          break;
        }
      }
      std::string s = trim(line);
      if (s.empty()) continue;
      if (s[0] == '[') {
        VLM_REQUIRE(s.back() == ']' && s.size() > 2, at, " expected '[section]', got '", s, "'");
        section = trim(s.substr(1, s.size() - 2));
        continue;
      }
      size_t eq = s.find('=');
      VLM_REQUIRE(eq != std::string::npos && eq > 0, at, " expected 'key = value' or '[section]', got '", s, "'");
      std::string key = trim(s.substr(0, eq)), raw = trim(s.substr(eq + 1));
      if (!section.empty()) key = section + "." + key;
      if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"') raw = raw.substr(1, raw.size() - 2);
      Opt* o = find(key);
      VLM_REQUIRE(o, at, " unknown option '", key, "' (did you mean '", closest(key), "'?)");
      VLM_REQUIRE(!seen.count(key), at, " '", key, "' is already set on line ", seen[key]);
      seen[key] = lineno;
      apply(*o, raw, cat(at, " ", key, " ="), rank);
    }
  }

  std::string describe(const Opt& o) const {
    std::string v = fmt_value(o);
    std::string d = "default " + (!v.empty() ? v : o.kind == Kind::IntList ? "empty" : "\"\"");
    if (!range_of(o).empty()) d += ", range " + range_of(o);
    if (o.kind == Kind::Choice) d += ", one of " + join(o.choices, ", ");
    return d;
  }

  // Options grouped by section: the top level ("") first, then sections in the order
  // of their first registration; registration order inside a section.
  std::vector<std::vector<const Opt*>> grouped() const {
    std::vector<std::string> names{""};
    std::vector<std::vector<const Opt*>> groups(1);
    for (const Opt& o : opts) {
      size_t g = std::find(names.begin(), names.end(), section_of(o.name)) - names.begin();
      if (g == names.size()) names.push_back(section_of(o.name)), groups.emplace_back();
      groups[g].push_back(&o);
    }
    return groups;
  }
};

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
void Config::add_int_list(const std::string& name, const std::string& def, const std::string& help) {
  Opt& o = impl_->add(name, Kind::IntList, help, po::value<std::string>());
  o.value = impl_->convert(o, def, "default of --" + name + ":");
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
    Opt* o = impl_->find(name);
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
  for (const auto& f : files) impl_->read_ini(f);
  return true;
}

void Config::read_ini(const std::string& path) { impl_->read_ini(path); }

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
const std::vector<std::string>& Config::positional() const { return impl_->positional; }

std::string Config::help() const {
  std::ostringstream os;
  os << "usage: " << impl_->program << " [options]" << (impl_->usage.empty() ? "" : " " + impl_->usage) << "\n\n"
     << "--name value or --name=value (a flag alone sets it); INI files: [section] then key = value.\n"
        "Later --config files win over earlier ones; the command line wins over all files.\n\n";
  std::vector<std::pair<std::string, std::string>> rows{  // (left column, text) or ("", section)
      {"--config FILE", "read an INI file of options (repeatable)"}, {"--help", "print this help and exit"}};
  for (const auto& group : impl_->grouped()) {
    if (!group.empty() && !section_of(group[0]->name).empty()) rows.push_back({"", section_of(group[0]->name)});
    for (const Opt* o : group) {
      std::string meta = o->kind == Kind::Choice ? " " + join(o->choices, "|") : kMeta[int(o->kind)];
      rows.push_back({"--" + o->name + meta, cat(o->help, " (", impl_->describe(*o), ")")});
    }
  }
  size_t w = 0;
  for (const auto& r : rows) w = std::max(w, r.first.size());
  for (const auto& r : rows) {
    if (r.first.empty()) os << "\n[" << r.second << "]\n";
    else os << "  " << r.first << std::string(w - r.first.size() + 2, ' ') << r.second << "\n";
  }
  return os.str();
}

std::string Config::dump_ini() const {
  std::ostringstream os;
  os << "# " << impl_->program << " options (read back with --config FILE)\n";
  for (const auto& group : impl_->grouped()) {
    std::string sec = group.empty() ? "" : section_of(group[0]->name);
    if (!sec.empty()) os << "\n[" << sec << "]\n";
    for (const Opt* o : group) {
      std::string v = fmt_value(*o), key = sec.empty() ? o->name : o->name.substr(sec.size() + 1);
      // Quote strings the reader would otherwise trim or cut at a comment.
      bool quote = (o->kind == Kind::String || o->kind == Kind::Choice) &&
                   (v.empty() || v != trim(v) || v.find(" #") != std::string::npos ||
                    v.find(" ;") != std::string::npos || v.front() == '"');
      os << key << " = " << (quote ? "\"" + v + "\"" : v) << "\n";
    }
  }
  return os.str();
}

}  // namespace vlm

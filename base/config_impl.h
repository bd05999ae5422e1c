// Private to base/config*.cpp: the option record, the value helpers and
// Config::Impl (the registry). See base/config.h for the behaviour.
// Precedence: each value carries the rank of its source (0 default, 1.. files in the
// order read, kCliRank the command line); a value replaces another only when its rank
// is not lower, so later files win and the command line wins over every file.
#pragma once
#include <algorithm>
#include <boost/any.hpp>
#include <boost/program_options.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"

namespace vlm {
namespace config_detail {

namespace po = boost::program_options;

inline constexpr int kCliRank = 1 << 30;
enum class Kind { Int, Float, String, Choice, Flag, IntList };
inline const char* const kNoun[] = {"an integer", "a number", "a string", "a choice",
                             "a boolean (true/false, yes/no, on/off, 1/0)", "a string"};
inline const char* const kMeta[] = {" INT", " FLOAT", " STR", "", "", " INT,INT,..."};

struct Opt {
  std::string name, help;
  Kind kind = Kind::String;
  int64_t ilo = INT64_MIN, ihi = INT64_MAX;
  double flo = -1e300, fhi = 1e300;
  std::vector<std::string> choices;
  boost::any value;  // int64_t, double, std::string, bool or std::vector<int64_t>
  int rank = 0;      // source of `value` (see the file comment)
  std::vector<std::string> aliases;  // short command-line spellings (add_alias)
};

std::string trim(const std::string& s);
// True when s[p] starts an INI comment: '#' or ';' at the start or after a space/tab
// (the reader's rule; the writer quotes any value in which it would fire).
inline bool comment_at(const std::string& s, size_t p) {
  return (s[p] == '#' || s[p] == ';') && (p == 0 || s[p - 1] == ' ' || s[p - 1] == '\t');
}
// Shortest %g form (6 to 17 digits) that reads back to the same double.
std::string fmt_float(double v);
// "[lo, hi]" of an int or float option; "" when it has the full default range.
std::string range_of(const Opt& o);
std::string fmt_value(const Opt& o);
size_t edit_distance(const std::string& a, const std::string& b);  // Levenshtein
// The section of a dotted name ("model.vision.width" -> "model.vision"; "seed" -> "").
std::string section_of(const std::string& name);

template <typename T>
std::string join(const std::vector<T>& v, const char* sep) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? sep : "") << v[i];
  return os.str();
}
// A choice option's words for help and messages, the empty word shown as "".
inline std::string join_choices(const std::vector<std::string>& v, const char* sep) {
  std::vector<std::string> shown(v);
  for (std::string& w : shown)
    if (w.empty()) w = "\"\"";
  return join(shown, sep);
}

}  // namespace config_detail

using namespace config_detail;

struct Config::Impl {
  std::string program, usage;
  po::options_description desc;  // the Boost value semantics, one per option
  std::vector<Opt> opts;         // registration order (a few hundred at most: found by a scan)
  std::vector<std::string> positional;
  std::vector<std::string> files;  // the INI files read, in order
  int max_positional = 0;      // allow_positionals()
  std::string positional_meta;
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
  // An option by its name or, on the command line, by one of its aliases.
  Opt* find_cli(const std::string& name) {
    if (Opt* o = find(name)) return o;
    auto it = std::find_if(opts.begin(), opts.end(), [&](const Opt& o) {
      return std::find(o.aliases.begin(), o.aliases.end(), name) != o.aliases.end();
    });
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
      // utf8 = false: values are bytes (paths need not be UTF-8, and Boost's conversion
      // through the C locale would refuse "café.h5").
      desc.find(o.name, false).semantic()->parse(v, {raw}, false);
    } catch (const std::exception&) {  // po::error, or anything else Boost may throw
      throw bad(cat("'", raw, "' is not ", kNoun[int(o.kind)]));
    }
    if (o.kind == Kind::Int) {
      int64_t x = boost::any_cast<int64_t>(v);
      if (x < o.ilo || x > o.ihi) throw bad(cat(x, " is out of range ", range_of(o)));
    } else if (o.kind == Kind::Float) {
      double x = boost::any_cast<double>(v);
      if (!(x >= o.flo && x <= o.fhi))  // also rejects NaN
        throw bad(cat(raw, " is out of range ", range_of(o)));
      // A value too small for a double reads as 0 (or a denormal): not what was written.
      const size_t e = raw.find_first_of("eE");
      const bool nonzero = raw.substr(0, e).find_first_of("123456789") != std::string::npos;
      if (nonzero && std::fabs(x) < std::numeric_limits<double>::min())
        throw bad(cat(raw, " is too small for a double (below ", std::numeric_limits<double>::min(), ")"));
    } else if (o.kind == Kind::Choice) {
      if (std::find(o.choices.begin(), o.choices.end(), raw) == o.choices.end())
        throw bad(cat("'", raw, "' is not one of ", join_choices(o.choices, ", ")));
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
      for (int64_t x : list)
        if (x < o.ilo || x > o.ihi) throw bad(cat("element ", x, " is out of range ", range_of(o)));
      v = list;
    }
    return v;
  }

  // Stores raw into o unless o holds a value from a source of higher rank.
  void apply(Opt& o, const std::string& raw, const std::string& where, int rank) {
    boost::any v = convert(o, raw, where);
    if (rank >= o.rank) o.value = v, o.rank = rank;
  }

  // Reads one INI file (config.cpp); every error names file:line and the key.
  void read_ini(const std::string& path);
  void read_ini_text(const std::string& text, const std::string& path);

  std::string describe(const Opt& o) const {
    std::string v = fmt_value(o);
    std::string d = "default " + (!v.empty() ? v : o.kind == Kind::IntList ? "empty" : "\"\"");
    if (!range_of(o).empty()) d += ", range " + range_of(o);
    if (o.kind == Kind::Choice) d += ", one of " + join_choices(o.choices, ", ");
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

}  // namespace vlm

// Text side of Config (base/config.h): value formatting, --help and dump_ini().
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/config_impl.h"

namespace vlm {
namespace config_detail {

// Shortest %g form (6 to 17 digits) that reads back to the same double.
std::string fmt_float(double v) {
  char buf[40];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// "[lo, hi]" of an int or float option; "" when it has the full default range.
std::string range_of(const Opt& o) {
  if ((o.kind == Kind::Int || o.kind == Kind::IntList) && (o.ilo != INT64_MIN || o.ihi != INT64_MAX))
    return cat("[", o.ilo, ", ", o.ihi, "]");
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

// The section of a dotted name ("model.vision.width" -> "model.vision"; "seed" -> "").
std::string section_of(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

}  // namespace config_detail

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
      std::string meta = kMeta[int(o->kind)];
      if (o->kind == Kind::Choice) meta.append(" ").append(join_choices(o->choices, "|"));
      std::ostringstream note;
      note << o->help << " (" << impl_->describe(*o);
      for (size_t k = 0; k < o->aliases.size(); ++k) note << (k ? ", --" : "; also --") << o->aliases[k];
      note << ")";
      rows.push_back({"--" + o->name + meta, note.str()});
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

std::string Config::dump_ini(bool set_only) const {
  std::ostringstream os;
  os << "# " << impl_->program << " options (read back with --config FILE)\n";
  for (const auto& group : impl_->grouped()) {
    std::string sec = group.empty() ? "" : section_of(group[0]->name);
    if (!sec.empty()) os << "\n[" << sec << "]\n";
    for (const Opt* o : group) {
      if (set_only && o->rank == 0) continue;
      std::string v = fmt_value(*o), key = sec.empty() ? o->name : o->name.substr(sec.size() + 1);
      // Quote strings the reader would otherwise trim or cut at a comment.
      // The value follows "= ", so the reader sees it as " " + v.
      const std::string read_as = " " + v;
      bool cut = false;
      for (size_t p = 1; p < read_as.size() && !cut; ++p) cut = comment_at(read_as, p);
      bool quote = (o->kind == Kind::String || o->kind == Kind::Choice) &&
                   (v.empty() || v != trim(v) || cut || v.front() == '"');
      os << key << " = " << (quote ? "\"" + v + "\"" : v) << "\n";
    }
  }
  return os.str();
}

}  // namespace vlm

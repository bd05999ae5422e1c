// OptionSet<T>: the options of a module declared once, each bound to the field of the
// plain struct T it fills (docs/architecture.md, "Core": a new option). The one
// declaration gives the name, the help, the range or choices, the command-line aliases
// and the converter; registration (add_to) and reading (read) are both derived from it,
// and the default is the field's own member initialiser (T{}), so nothing is written twice.
//
//   const OptionSet<TrainOptions>& train_options() {
//     static const OptionSet<TrainOptions> set([](OptionSet<TrainOptions>& s) {
//       s.option("train.batch", &TrainOptions::batch, "images per micro-batch").range(1, 1 << 20);
//       s.option("train.lr", at(&TrainOptions::optim, &OptimOptions::lr), "peak learning rate").range(0, 10);
//       s.option("train.schedule", at(&TrainOptions::optim, &OptimOptions::schedule), "decay")
//           .choices(choices_of(schedule_name, {LrSchedule::Cosine, LrSchedule::Linear}));
//     });
//     return set;
//   }
//   train_options().add_to(cfg);                  // registers them, in declaration order
//   TrainOptions t = train_options().read(cfg);   // T{} with every declared field read
//
// The option's kind follows the field's type:
//   bool -> a flag; integers -> an integer (read into the field's type: a value the type
//   cannot hold is a UserError); float, double -> a number (a float field's default is
//   the decimal it prints as, 0.9f -> 0.9); std::string -> a string, or a choice with
//   one_of({...}); std::vector<int64_t> -> a comma-separated list of integers.
//   choices({{"word", value}, ...}) (or choices_of(name_function, {values})) reads a
//   choice into any field (enums, bools); parse(default_text, fn) reads a string (or a
//   one_of choice) through fn(text) or fn(text, the struct read so far), for values such
//   as "auto" or comma lists; its default text must parse to the field's default.
// Internal errors (VLM_ASSERT): a name or a field declared twice, a modifier that does not
// fit the field's type, a default outside its range or choices (Config's checks).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/error.h"

namespace vlm {

// The words of a choice option and the values they are read as, in --help order.
template <class V>
using Choices = std::vector<std::pair<std::string, V>>;

// The choices of an enum named by its name function: choices_of(mode_name, {Mode::A, ...}).
template <class E>
Choices<E> choices_of(const char* (*name)(E), std::initializer_list<E> values) {
  Choices<E> c;
  for (E v : values) c.emplace_back(name(v), v);
  return c;
}

// A field of a member struct: at(&TrainOptions::optim, &OptimOptions::lr).
template <class T, class S, class V>
struct NestedField {
  S T::*outer;
  V S::*inner;
};
template <class T, class S, class V>
NestedField<T, S, V> at(S T::*outer, V S::*inner) {
  return {outer, inner};
}

namespace options_detail {

// The double of the shortest decimal that reads back as f (0.9f -> 0.9).
double decimal_of(float f);

template <class O, class T, class V>
auto& field_of(O& obj, V T::*m) {
  return obj.*m;
}
template <class O, class T, class S, class V>
auto& field_of(O& obj, const NestedField<T, S, V>& n) {
  return (obj.*n.outer).*n.inner;
}

template <class V>
inline constexpr bool kIsIntList = std::is_same_v<V, std::vector<int64_t>>;
template <class V>
inline constexpr bool kIsInt = std::is_integral_v<V> && !std::is_same_v<V, bool>;

}  // namespace options_detail

template <class T>
class OptionSet {
 public:
  // One declared option, type-erased (its typed builder is Field<V> below).
  class Option {
   public:
    virtual ~Option() = default;
    const std::string& name() const { return name_; }

   protected:
    Option(std::string name, std::string help, size_t offset, std::type_index type)
        : name_(std::move(name)), help_(std::move(help)), offset_(offset), type_(type) {}
    virtual void add_to(Config& cfg, const T& defaults) const = 0;
    virtual void read(const Config& cfg, T& out) const = 0;

    std::string name_, help_;
    std::vector<std::string> aliases_;
    size_t offset_;         // of the field inside T: which field it is (name_of)
    std::type_index type_;  // the field's type (two fields may share an offset)
    friend class OptionSet;
  };

  // The option bound to a field of type V; its modifiers return it, to be chained.
  template <class V>
  class Field final : public Option {
   public:
    // Inclusive bounds of an integer, number or integer-list option.
    template <class L, class H>
    Field& range(L lo, H hi) {
      static_assert((std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) || options_detail::kIsIntList<V>,
                    "range() needs a numeric or integer-list field");
      if constexpr (std::is_floating_point_v<V>) flo_ = double(lo), fhi_ = double(hi);
      else ilo_ = int64_t(lo), ihi_ = int64_t(hi);
      return *this;
    }
    template <class L>
    Field& at_least(L lo) {
      if constexpr (std::is_floating_point_v<V>) return range(lo, fhi_);
      else return range(lo, ihi_);
    }
    // The words a string (or parsed) option accepts, in --help order.
    Field& one_of(std::vector<std::string> words) {
      VLM_ASSERT((std::is_same_v<V, std::string> || parse_), "one_of() on '", this->name_,
                 "' needs a string field or a parse() before it");
      words_ = std::move(words);
      return *this;
    }
    Field& choices(Choices<V> c) {
      choices_ = std::move(c);
      return *this;
    }
    // Reads the option's text through fn(text) or fn(text, the struct read so far: the
    // fields declared before this one); `default_text` is its default, which must parse to
    // the field's default.
    template <class F>
    Field& parse(std::string default_text, F fn) {
      default_text_ = std::move(default_text);
      if constexpr (std::is_invocable_v<F, const std::string&, const T&>) parse_ = fn;
      else parse_ = [fn](const std::string& s, const T&) { return V(fn(s)); };
      return *this;
    }
    // A short command-line spelling (`--tp` for parallel.tp); INI files use the name.
    Field& alias(std::string a) {
      this->aliases_.push_back(std::move(a));
      return *this;
    }

    template <class F>
    Field(std::string name, F field, std::string help, size_t offset)
        : Option(std::move(name), std::move(help), offset, typeid(V)),
          ref_([field](T& t) -> V& { return options_detail::field_of(t, field); }),
          cref_([field](const T& t) -> const V& { return options_detail::field_of(t, field); }) {}

   private:
    void add_to(Config& cfg, const T& defaults) const override {
      const std::string& n = this->name_;
      const V& def = cref_(defaults);
      if (parse_) {
        VLM_ASSERT(parse_(default_text_, defaults) == def, "default '", default_text_, "' of option '", n,
                   "' does not parse to its field's default");
        if (words_.empty()) cfg.add_string(n, default_text_, this->help_);
        else cfg.add_choice(n, default_text_, words_, this->help_);
      } else if (!choices_.empty()) {
        std::vector<std::string> words;
        const std::string* word = nullptr;
        for (const auto& [w, v] : choices_) {
          words.push_back(w);
          if (v == def && !word) word = &w;
        }
        VLM_ASSERT(word, "the default of option '", n, "' is none of its choices");
        cfg.add_choice(n, *word, words, this->help_);
      } else if constexpr (std::is_same_v<V, std::string>) {
        if (words_.empty()) cfg.add_string(n, def, this->help_);
        else cfg.add_choice(n, def, words_, this->help_);
      } else if constexpr (std::is_same_v<V, bool>) {
        cfg.add_flag(n, def, this->help_);
      } else if constexpr (options_detail::kIsInt<V>) {
        cfg.add_int(n, int64_t(def), this->help_, ilo_, ihi_);
      } else if constexpr (std::is_same_v<V, float>) {
        cfg.add_float(n, options_detail::decimal_of(def), this->help_, flo_, fhi_);
      } else if constexpr (std::is_same_v<V, double>) {
        cfg.add_float(n, def, this->help_, flo_, fhi_);
      } else if constexpr (options_detail::kIsIntList<V>) {
        std::string text;
        for (size_t i = 0; i < def.size(); ++i) text.append(i ? "," : "").append(std::to_string(def[i]));
        cfg.add_int_list(n, text, this->help_, ilo_, ihi_);
      } else {
        VLM_ASSERT(false, "option '", n, "' needs choices() or parse() to be read into its field");
      }
      for (const std::string& a : this->aliases_) cfg.add_alias(a, n);
    }

    void read(const Config& cfg, T& out) const override {
      const std::string& n = this->name_;
      V& field = ref_(out);
      if (parse_) {
        field = parse_(cfg.get_string(n), out);
      } else if (!choices_.empty()) {
        const std::string& w = cfg.get_string(n);
        auto it = std::find_if(choices_.begin(), choices_.end(), [&](const auto& c) { return c.first == w; });
        VLM_ASSERT(it != choices_.end(), "option '", n, "' holds '", w, "', none of its choices");
        field = it->second;
      } else if constexpr (std::is_same_v<V, std::string>) {
        field = cfg.get_string(n);
      } else if constexpr (std::is_same_v<V, bool>) {
        field = cfg.get_flag(n);
      } else if constexpr (options_detail::kIsInt<V>) {
        const int64_t x = cfg.get_int(n);
        if (!std::in_range<V>(x)) {
          const int64_t lo = std::max(ilo_, int64_t(std::numeric_limits<V>::min()));
          const int64_t hi = std::in_range<int64_t>(std::numeric_limits<V>::max())
                                 ? std::min(ihi_, int64_t(std::numeric_limits<V>::max())) : ihi_;
          throw UserError(cat("--", n, ": ", x, " is out of range [", lo, ", ", hi, "]"));
        }
        field = V(x);
      } else if constexpr (std::is_floating_point_v<V>) {
        field = V(cfg.get_float(n));
      } else if constexpr (options_detail::kIsIntList<V>) {
        field = cfg.get_int_list(n);
      }
    }

    std::function<V&(T&)> ref_;
    std::function<const V&(const T&)> cref_;
    int64_t ilo_ = INT64_MIN, ihi_ = INT64_MAX;  // Config's full ranges
    double flo_ = -1e300, fhi_ = 1e300;
    std::vector<std::string> words_;
    Choices<V> choices_;
    std::string default_text_;
    std::function<V(const std::string&, const T&)> parse_;
  };

  OptionSet() = default;
  // Runs `declare` on the new set: the form of the per-module declaration (file comment).
  explicit OptionSet(const std::function<void(OptionSet&)>& declare) { declare(*this); }
  OptionSet(const OptionSet&) = delete;
  OptionSet& operator=(const OptionSet&) = delete;

  // Declares option `name` bound to `field` (a member pointer of T, or at(...) for a
  // field of a member struct).
  template <class F>
  auto& option(std::string name, F field, std::string help) {
    using V = std::remove_cvref_t<decltype(options_detail::field_of(defaults_, field))>;
    VLM_ASSERT(!find(name), "option '", name, "' declared twice");
    const size_t off = offset_of(field);
    for (const auto& o : options_)
      VLM_ASSERT(o->offset_ != off || o->type_ != typeid(V), "option '", name, "' is bound to the field of option '",
                 o->name_, "'");
    auto f = std::make_unique<Field<V>>(std::move(name), field, std::move(help), off);
    Field<V>& ref = *f;
    options_.push_back(std::move(f));
    return ref;
  }

  // Registers every option in declaration order (defaults: T{}'s fields).
  void add_to(Config& cfg) const {
    for (const auto& o : options_) o->add_to(cfg, defaults_);
  }
  // T{} with every declared field read from cfg, in declaration order.
  T read(const Config& cfg) const {
    T t{};
    for (const auto& o : options_) o->read(cfg, t);
    return t;
  }
  // The name of the option bound to `field` (a member pointer or at(...)).
  template <class F>
  const std::string& name_of(F field) const {
    using V = std::remove_cvref_t<decltype(options_detail::field_of(defaults_, field))>;
    const size_t off = offset_of(field);
    for (const auto& o : options_)
      if (o->offset_ == off && o->type_ == typeid(V)) return o->name_;
    VLM_ASSERT(false, "no option is bound to this field");
    return options_.front()->name_;  // unreachable
  }
  // True when the option of `field` was given (a file or the command line), not defaulted.
  template <class F>
  bool is_set(const Config& cfg, F field) const {
    return cfg.is_set(name_of(field));
  }
  // True when every option of the set is registered in cfg (code shared by commands that
  // register it and commands that do not).
  bool registered_in(const Config& cfg) const {
    for (const auto& o : options_)
      if (!cfg.has(o->name_)) return false;
    return true;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& o : options_) n.push_back(o->name_);
    return n;
  }

 private:
  const Option* find(const std::string& name) const {
    for (const auto& o : options_)
      if (o->name_ == name) return o.get();
    return nullptr;
  }
  template <class F>
  size_t offset_of(F field) const {
    return size_t(reinterpret_cast<const char*>(&options_detail::field_of(defaults_, field)) -
                  reinterpret_cast<const char*>(&defaults_));
  }

  T defaults_{};
  std::vector<std::unique_ptr<Option>> options_;
};

}  // namespace vlm

// Tests of OptionSet (base/options.h), the one declaration an option has: every declared
// option is registered with its field's default (a float's as the decimal it prints as),
// read into its own field and no other (every kind: integers, numbers, flags, strings,
// one_of words, choices of enums and bools, integer lists, parse converters that see the
// fields declared before them, fields of member structs), its range and choices are
// enforced with Config's messages (and an integer the field cannot hold is refused),
// name_of / is_set / registered_in find it by its field, and a name or a field declared
// twice, a default the converter or the choices disagree with, or a field without a way
// to read it is an internal error.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/options.h"
#include "tests/support/errors.h"

namespace vlm {
namespace {

using test::error_of;
using test::parse_args;

enum class Color { Red, Green, Blue };
const char* color_name(Color c) { return c == Color::Red ? "red" : c == Color::Green ? "green" : "blue"; }

struct Inner {
  double rate = 0.25;
  int64_t count = 3;
};

struct Opts {
  int small = 4;
  int64_t big = int64_t(1) << 20;
  uint64_t seed = 7;
  float ratio = 0.9f;
  float eps = 1e-8f;
  double scale = 1.5;
  bool on = false;
  std::string name = "x";
  std::string mode = "fast";
  Color color = Color::Green;
  bool texture = true;
  std::vector<int64_t> list{1, 2};
  int64_t budget = 0;  // t.budget: "auto" or a positive integer
  bool tied = true;    // t.tied: auto (= color is green), true or false
  Inner inner;
  int undeclared = 42;  // no option: read() keeps T{}'s value
};

// Every kind of option, in this order.
void declare(OptionSet<Opts>& s) {
  s.option("t.small", &Opts::small, "an int").at_least(1);
  s.option("t.big", &Opts::big, "an int64").range(0, int64_t(1) << 40).alias("big");
  s.option("t.seed", &Opts::seed, "a uint64").range(0, INT64_MAX);
  s.option("t.ratio", &Opts::ratio, "a float").range(0, 1);
  s.option("t.eps", &Opts::eps, "a small float").range(0, 1);
  s.option("t.scale", &Opts::scale, "a double").at_least(0.5);
  s.option("t.on", &Opts::on, "a flag");
  s.option("t.name", &Opts::name, "a string");
  s.option("t.mode", &Opts::mode, "words").one_of({"fast", "slow"});
  s.option("t.color", &Opts::color, "an enum").choices(choices_of(color_name, {Color::Red, Color::Green, Color::Blue}));
  s.option("t.texture", &Opts::texture, "a bool choice").choices({{"on", true}, {"off", false}});
  s.option("t.list", &Opts::list, "an int list").range(0, 100);
  s.option("t.budget", &Opts::budget, "auto or N").parse("auto", [](const std::string& v) -> int64_t {
    if (v == "auto") return 0;
    VLM_REQUIRE(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v != "0", "t.budget=", v,
                ": expected 'auto' or a positive integer");
    return std::stoll(v);
  });
  s.option("t.tied", &Opts::tied, "auto, true or false")
      .parse("auto", [](const std::string& v, const Opts& o) { return v == "auto" ? o.color == Color::Green : v == "true"; })
      .one_of({"auto", "true", "false"});
  s.option("u.rate", at(&Opts::inner, &Inner::rate), "a nested double").range(0, 1);
  s.option("u.count", at(&Opts::inner, &Inner::count), "a nested int64").range(0, 10);
}

const OptionSet<Opts>& opts() {
  static const OptionSet<Opts> set(declare);
  return set;
}

std::unique_ptr<Config> registered() {
  auto c = std::make_unique<Config>("test");
  opts().add_to(*c);
  return c;
}

TEST(OptionSet, RegistersEveryDeclaredOptionWithItsFieldsDefault) {
  Config c("test");
  EXPECT_FALSE(opts().registered_in(c));
  opts().add_to(c);
  EXPECT_TRUE(opts().registered_in(c));
  const std::vector<std::string> names = opts().names();
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(names.front(), "t.small");
  EXPECT_EQ(names.back(), "u.count");
  for (const std::string& n : names) EXPECT_TRUE(c.has(n)) << n;
  EXPECT_EQ(c.get_int("t.small"), 4);
  EXPECT_EQ(c.get_int("t.big"), int64_t(1) << 20);
  EXPECT_EQ(c.get_int("t.seed"), 7);
  EXPECT_EQ(c.get_float("t.ratio"), 0.9);  // the decimal 0.9f prints as, not 0.89999997615814209
  EXPECT_EQ(c.get_float("t.eps"), 1e-8);
  EXPECT_EQ(c.get_float("t.scale"), 1.5);
  EXPECT_FALSE(c.get_flag("t.on"));
  EXPECT_EQ(c.get_string("t.name"), "x");
  EXPECT_EQ(c.get_string("t.mode"), "fast");
  EXPECT_EQ(c.get_string("t.color"), "green");
  EXPECT_EQ(c.get_string("t.texture"), "on");
  EXPECT_EQ(c.get_int_list("t.list"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.get_string("t.budget"), "auto");
  EXPECT_EQ(c.get_string("t.tied"), "auto");
  EXPECT_EQ(c.get_float("u.rate"), 0.25);
  EXPECT_EQ(c.get_int("u.count"), 3);
  // --help shows what Config shows for add_* registrations: kind, default, range, choices, alias.
  const std::string h = c.help();
  EXPECT_NE(h.find("--t.small INT"), std::string::npos) << h;
  EXPECT_NE(h.find("an int64 (default 1048576, range [0, 1099511627776]; also --big)"), std::string::npos) << h;
  EXPECT_NE(h.find("a float (default 0.9, range [0, 1])"), std::string::npos) << h;
  EXPECT_NE(h.find("a small float (default 1e-08, range [0, 1])"), std::string::npos) << h;
  EXPECT_NE(h.find("--t.color red|green|blue"), std::string::npos) << h;
  EXPECT_NE(h.find("a bool choice (default on, one of on, off)"), std::string::npos) << h;
  EXPECT_NE(h.find("--t.tied auto|true|false"), std::string::npos) << h;
  EXPECT_NE(h.find("a nested double (default 0.25, range [0, 1])"), std::string::npos) << h;
}

TEST(OptionSet, ReadWithNothingGivenIsTheStructsDefault) {
  const auto c = registered();
  ASSERT_TRUE(parse_args(*c, {}));
  const Opts o = opts().read(*c), d{};
  EXPECT_EQ(o.small, d.small);
  EXPECT_EQ(o.big, d.big);
  EXPECT_EQ(o.seed, d.seed);
  EXPECT_EQ(o.ratio, d.ratio);  // bitwise: 0.9 read back as a float is 0.9f
  EXPECT_EQ(o.eps, d.eps);
  EXPECT_EQ(o.scale, d.scale);
  EXPECT_EQ(o.on, d.on);
  EXPECT_EQ(o.name, d.name);
  EXPECT_EQ(o.mode, d.mode);
  EXPECT_EQ(o.color, d.color);
  EXPECT_EQ(o.texture, d.texture);
  EXPECT_EQ(o.list, d.list);
  EXPECT_EQ(o.budget, d.budget);
  EXPECT_EQ(o.tied, d.tied);
  EXPECT_EQ(o.inner.rate, d.inner.rate);
  EXPECT_EQ(o.inner.count, d.inner.count);
  EXPECT_EQ(o.undeclared, 42);
  for (const std::string& n : opts().names()) EXPECT_FALSE(c->is_set(n)) << n;
}

TEST(OptionSet, EveryOptionIsReadIntoItsOwnField) {
  const auto c = registered();
  ASSERT_TRUE(parse_args(*c, {"--t.small=9", "--big", "1000", "--t.seed", "123", "--t.ratio", "0.3", "--t.eps=2e-3",
                             "--t.scale", "8", "--t.on", "--t.name", "y z", "--t.mode", "slow", "--t.color", "blue",
                             "--t.texture", "off", "--t.list", "5,6,7", "--t.budget", "64", "--t.tied", "auto",
                             "--u.rate", "0.5", "--u.count", "9"}));
  const Opts o = opts().read(*c);
  EXPECT_EQ(o.small, 9);
  EXPECT_EQ(o.big, 1000);
  EXPECT_EQ(o.seed, 123u);
  EXPECT_EQ(o.ratio, 0.3f);
  EXPECT_EQ(o.eps, 2e-3f);
  EXPECT_EQ(o.scale, 8.0);
  EXPECT_TRUE(o.on);
  EXPECT_EQ(o.name, "y z");
  EXPECT_EQ(o.mode, "slow");
  EXPECT_EQ(o.color, Color::Blue);
  EXPECT_FALSE(o.texture);
  EXPECT_EQ(o.list, (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(o.budget, 64);
  EXPECT_FALSE(o.tied);  // auto after t.color=blue: the converter sees the fields declared before it
  EXPECT_EQ(o.inner.rate, 0.5);
  EXPECT_EQ(o.inner.count, 9);
  EXPECT_EQ(o.undeclared, 42);
  for (const std::string& n : opts().names()) EXPECT_TRUE(c->is_set(n)) << n;

  // One option at a time: only its own field moves.
  const auto one = registered();
  ASSERT_TRUE(parse_args(*one, {"--u.count", "0"}));
  const Opts p = opts().read(*one);
  EXPECT_EQ(p.inner.count, 0);
  EXPECT_EQ(p.inner.rate, 0.25);
  EXPECT_EQ(p.big, int64_t(1) << 20);
  EXPECT_TRUE(p.tied);
}

TEST(OptionSet, RangesChoicesAndConvertersRefuseBadValues) {
  auto err = [](std::vector<std::string> args) {
    const auto c = registered();
    return error_of([&] {
      parse_args(*c, args);
      opts().read(*c);
    });
  };
  EXPECT_EQ(err({"--t.small", "0"}), "--t.small: 0 is out of range [1, 9223372036854775807]");
  EXPECT_EQ(err({"--big", "-1"}), "--big: -1 is out of range [0, 1099511627776]");
  EXPECT_EQ(err({"--t.ratio", "1.5"}), "--t.ratio: 1.5 is out of range [0, 1]");
  EXPECT_EQ(err({"--t.scale", "0.25"}), "--t.scale: 0.25 is out of range [0.5, 1e+300]");
  EXPECT_EQ(err({"--t.mode", "medium"}), "--t.mode: 'medium' is not one of fast, slow");
  EXPECT_EQ(err({"--t.color", "green "}), "--t.color: 'green ' is not one of red, green, blue");
  EXPECT_EQ(err({"--t.texture", "yes"}), "--t.texture: 'yes' is not one of on, off");
  EXPECT_EQ(err({"--t.tied", "yes"}), "--t.tied: 'yes' is not one of auto, true, false");
  EXPECT_EQ(err({"--t.list", "1,200"}), "--t.list: element 200 is out of range [0, 100]");
  EXPECT_EQ(err({"--u.count", "11"}), "--u.count: 11 is out of range [0, 10]");
  // A converter's own refusal, when the options are read.
  EXPECT_EQ(err({"--t.budget", "many"}), "t.budget=many: expected 'auto' or a positive integer");
  // An integer the field's type cannot hold (the declared range allows it).
  EXPECT_EQ(err({"--t.small", "3000000000"}), "--t.small: 3000000000 is out of range [1, 2147483647]");
  EXPECT_EQ(err({"--t.small", "2147483647"}), "");
}

TEST(OptionSet, NameOfAndIsSetFindTheOptionByItsField) {
  EXPECT_EQ(opts().name_of(&Opts::ratio), "t.ratio");
  EXPECT_EQ(opts().name_of(&Opts::tied), "t.tied");
  EXPECT_EQ(opts().name_of(at(&Opts::inner, &Inner::rate)), "u.rate");
  EXPECT_EQ(opts().name_of(at(&Opts::inner, &Inner::count)), "u.count");
  const auto c = registered();
  ASSERT_TRUE(parse_args(*c, {"--big", "5"}));  // the alias sets the option
  EXPECT_TRUE(opts().is_set(*c, &Opts::big));
  EXPECT_FALSE(opts().is_set(*c, &Opts::small));
  EXPECT_FALSE(opts().is_set(*c, at(&Opts::inner, &Inner::rate)));
}

TEST(OptionSet, IniFilesAndDumpIniRoundTrip) {
  const auto c = registered();
  c->read_ini_text("[t]\ncolor = red\nbudget = 7\ntied = auto\n[u]\nrate = 0.125\n", "x.cfg");
  const Opts o = opts().read(*c);
  EXPECT_EQ(o.color, Color::Red);
  EXPECT_EQ(o.budget, 7);
  EXPECT_FALSE(o.tied);
  // A UTF-8 byte-order mark before the first line (Windows editors) is not part of it.
  const auto bom = registered();
  bom->read_ini_text("\xEF\xBB\xBF[t]\nbudget = 9\n", "bom.cfg");
  EXPECT_EQ(opts().read(*bom).budget, 9);
  // A section no option of the command is in is refused even without keys under it.
  try {
    registered()->read_ini_text("[t]\nbudget = 9\n[nosuch]\n", "s.cfg");
    ADD_FAILURE() << "an unknown empty section was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("s.cfg:3: unknown section '[nosuch]'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(o.inner.rate, 0.125);
  const auto back = registered();
  back->read_ini_text(c->dump_ini(), "dump");
  const Opts b = opts().read(*back);
  EXPECT_EQ(b.color, Color::Red);
  EXPECT_EQ(b.budget, 7);
  EXPECT_EQ(b.ratio, 0.9f);
  EXPECT_EQ(b.inner.rate, 0.125);
}

// The float defaults of the project's options print as their decimals.
TEST(OptionSet, FloatDefaultsAreTheirDecimals) {
  for (float f : {0.9f, 0.95f, 1e-8f, 0.02f, 1e-5f, 0.01f, 1.0f, 10000.f, 0.f})
    EXPECT_EQ(float(options_detail::decimal_of(f)), f) << f;
  EXPECT_EQ(options_detail::decimal_of(0.95f), 0.95);
  EXPECT_EQ(options_detail::decimal_of(1e-5f), 1e-5);
  EXPECT_EQ(options_detail::decimal_of(0.02f), 0.02);
}

struct Two {
  int a = 1, b = 2;
  Color c = Color::Red;
  int64_t n = 5;
};

TEST(OptionSetDeathTest, ANameOrAFieldDeclaredTwiceIsAnInternalError) {
  EXPECT_DEATH(OptionSet<Two>([](OptionSet<Two>& s) {
                 s.option("two.a", &Two::a, "a");
                 s.option("two.a", &Two::b, "b");
               }),
               "option 'two.a' declared twice");
  EXPECT_DEATH(OptionSet<Two>([](OptionSet<Two>& s) {
                 s.option("two.a", &Two::a, "a");
                 s.option("two.b", &Two::a, "b");
               }),
               "option 'two.b' is bound to the field of option 'two.a'");
  // Two sets that declare one name, registered into one Config.
  const OptionSet<Two> x([](OptionSet<Two>& s) { s.option("two.a", &Two::a, "a"); });
  const OptionSet<Two> y([](OptionSet<Two>& s) { s.option("two.a", &Two::b, "b"); });
  Config c("test");
  x.add_to(c);
  EXPECT_DEATH(y.add_to(c), "option 'two.a' registered twice");
}

TEST(OptionSetDeathTest, DefaultsAndConvertersMustAgreeWithTheStruct) {
  Config c("test");
  const OptionSet<Two> parse([](OptionSet<Two>& s) {
    s.option("two.n", &Two::n, "n").parse("6", [](const std::string& v) { return int64_t(std::stoll(v)); });
  });
  EXPECT_DEATH(parse.add_to(c), "default '6' of option 'two.n' does not parse to its field's default");
  const OptionSet<Two> choices([](OptionSet<Two>& s) {
    s.option("two.c", &Two::c, "c").choices({{"green", Color::Green}, {"blue", Color::Blue}});
  });
  EXPECT_DEATH(choices.add_to(c), "the default of option 'two.c' is none of its choices");
  const OptionSet<Two> unread([](OptionSet<Two>& s) { s.option("two.c", &Two::c, "c"); });
  EXPECT_DEATH(unread.add_to(c), "option 'two.c' needs choices\\(\\) or parse\\(\\)");
  const OptionSet<Two> range([](OptionSet<Two>& s) { s.option("two.a", &Two::a, "a").range(2, 3); });
  EXPECT_DEATH(range.add_to(c), "default of 'two.a' out of its range");
  EXPECT_DEATH(OptionSet<Two>([](OptionSet<Two>& s) { s.option("two.a", &Two::a, "a").one_of({"x"}); }),
               "one_of\\(\\) on 'two.a' needs a string field");
}

}  // namespace
}  // namespace vlm

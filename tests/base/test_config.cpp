// Tests of Config (base/config.h): precedence default < file1 < file2 < command line,
// every rejection with its exact message (INI errors name file:line and the key),
// flags, int lists, the dump_ini round trip and the --help listing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/config.h"
#include "base/error.h"
#include "core/device_options.h"
#include "tests/support/errors.h"

namespace vlm {
namespace {

using test::error_of;
using test::parse_args;

// A file in a fresh temp folder, removed at the end of the test.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vlm_config_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

void register_model(Config& c) {
  register_device_options(c);
  c.add_int("model.d_model", 768, "model width", 1, 65536);
  c.add_int("model.n_layer", 12, "blocks");
  c.add_float("train.lr", 3e-4, "peak learning rate", 0.0, 1.0);
  c.add_string("train.out", "runs/x", "output folder");
  c.add_flag("train.resume", false, "resume from the latest checkpoint");
  c.add_int_list("model.lod", "1,2,4", "levels of detail");
}

TEST_F(ConfigTest, DefaultsWhenNothingIsGiven) {
  Config c;
  register_model(c);
  ASSERT_TRUE(parse_args(c, {}));
  EXPECT_EQ(c.get_int("model.d_model"), 768);
  EXPECT_EQ(c.get_float("train.lr"), 3e-4);
  EXPECT_EQ(c.get_string("device"), "auto");
  EXPECT_EQ(c.get_int("seed"), 1234);
  EXPECT_FALSE(c.get_flag("train.resume"));
  EXPECT_EQ(c.get_int_list("model.lod"), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_FALSE(c.is_set("model.d_model"));
}

TEST_F(ConfigTest, PrecedenceDefaultFileFileCommandLine) {
  std::string f1 = write("a.cfg", "seed = 7\n[model]\nd_model = 256\nn_layer = 4\n[train]\nlr = 0.1\n");
  std::string f2 = write("b.cfg", "# second file\n[model]\nd_model = 512 ; inline comment\n");
  Config c;
  register_model(c);
  c.allow_positionals(1, "RUN");
  // The command line wins even when it comes before the files that set the same key.
  ASSERT_TRUE(parse_args(c, {"--train.lr=0.5", "--config", f1, "--config=" + f2, "run1", "--seed", "9"}));
  EXPECT_EQ(c.get_int("model.n_layer"), 4);     // file 1 only
  EXPECT_EQ(c.get_int("model.d_model"), 512);   // file 2 over file 1
  EXPECT_EQ(c.get_float("train.lr"), 0.5);      // command line over file 1
  EXPECT_EQ(c.get_int("seed"), 9);              // command line over file 1
  EXPECT_EQ(c.get_string("train.out"), "runs/x");  // default
  EXPECT_TRUE(c.is_set("model.n_layer"));
  EXPECT_FALSE(c.is_set("train.out"));
  EXPECT_EQ(c.positional(), (std::vector<std::string>{"run1"}));
  // read_ini after parse: a later file wins over earlier files, never over the command line.
  c.read_ini(write("c.cfg", "[model]\nd_model = 1024\n[train]\nlr = 0.25\n"));
  EXPECT_EQ(c.get_int("model.d_model"), 1024);
  EXPECT_EQ(c.get_float("train.lr"), 0.5);
}

TEST_F(ConfigTest, IniErrorsNameFileLineAndKey) {
  const std::string F = (dir_ / "x.cfg").string();
  auto err = [&](const std::string& text) {
    write("x.cfg", text);
    Config c;
    register_model(c);
    return error_of([&] { c.read_ini(F); });
  };
  EXPECT_EQ(err("[model]\n\n# c\nd_modle = 3\n"), F + ":4: unknown option 'model.d_modle' (did you mean 'model.d_model'?)");
  EXPECT_EQ(err("\n\n[model]\nd_model = -4\n"), F + ":4: model.d_model = -4 is out of range [1, 65536]");
  EXPECT_EQ(err("[train]\nlr = abc\n"), F + ":2: train.lr = 'abc' is not a number");
  EXPECT_EQ(err("[train]\nlr = 2\n"), F + ":2: train.lr = 2 is out of range [0, 1]");
  EXPECT_EQ(err("[model]\nn_layer = 1.5\n"), F + ":2: model.n_layer = '1.5' is not an integer");
  EXPECT_EQ(err("device = gpu\n"), F + ":1: device = 'gpu' is not one of auto, cpu, cuda");
  EXPECT_EQ(err("[train]\nresume = maybe\n"),
            F + ":2: train.resume = 'maybe' is not a boolean (true/false, yes/no, on/off, 1/0)");
  EXPECT_EQ(err("[model]\nlod = 1,x\n"), F + ":2: model.lod = '1,x' is not a comma-separated list of integers");
  EXPECT_EQ(err("[model]\nd_model = 3\nd_model = 4\n"), F + ":3: 'model.d_model' is already set on line 2");
  EXPECT_EQ(err("[model\n"), F + ":1: expected '[section]', got '[model'");
  EXPECT_EQ(err("d_model\n"), F + ":1: expected 'key = value' or '[section]', got 'd_model'");
}

TEST_F(ConfigTest, CommandLineErrorsNameTheOption) {
  auto err = [&](std::vector<std::string> args) {
    Config c;
    register_model(c);
    return error_of([&] { parse_args(c, args); });
  };
  EXPECT_EQ(err({"--train.lr", "abc"}), "--train.lr: 'abc' is not a number");
  EXPECT_EQ(err({"--model.d_model=-4"}), "--model.d_model: -4 is out of range [1, 65536]");
  EXPECT_EQ(err({"--model.d_model", "70000"}), "--model.d_model: 70000 is out of range [1, 65536]");
  EXPECT_EQ(err({"--device", "gpu"}), "--device: 'gpu' is not one of auto, cpu, cuda");
  EXPECT_EQ(err({"--model.d_modle", "3"}), "unknown option '--model.d_modle' (did you mean '--model.d_model'?)");
  EXPECT_EQ(err({"--train.rl=3"}), "unknown option '--train.rl' (did you mean '--train.lr'?)");
  EXPECT_EQ(err({"-x"}), "unknown option '-x' (options are --name value or --name=value)");
  EXPECT_EQ(err({"--train.lr"}), "--train.lr: missing value");
  EXPECT_EQ(err({"--train.resume=perhaps"}),
            "--train.resume: 'perhaps' is not a boolean (true/false, yes/no, on/off, 1/0)");
  std::string missing = (dir_ / "nope.cfg").string();
  EXPECT_EQ(err({"--config", missing}), "cannot open config file '" + missing + "': No such file or directory");
  EXPECT_EQ(err({"--config", dir_.string()}), "cannot open config file '" + dir_.string() + "': is a directory");
}

TEST_F(ConfigTest, FlagsListsAndPositionals) {
  Config c;
  register_model(c);
  c.allow_positionals(3, "WORD");
  ASSERT_TRUE(parse_args(c, {"a", "--train.resume", "b", "--model.lod=", "--", "--not-an-option"}));
  EXPECT_TRUE(c.get_flag("train.resume"));  // a flag alone does not take the next word
  EXPECT_EQ(c.get_int_list("model.lod"), std::vector<int64_t>{});
  EXPECT_EQ(c.positional(), (std::vector<std::string>{"a", "b", "--not-an-option"}));

  Config d;
  register_model(d);
  ASSERT_TRUE(parse_args(d, {"--train.resume=false", "--model.lod", " 8, 16 ,-3"}));
  EXPECT_FALSE(d.get_flag("train.resume"));
  EXPECT_TRUE(d.is_set("train.resume"));
  EXPECT_EQ(d.get_int_list("model.lod"), (std::vector<int64_t>{8, 16, -3}));

  Config e;
  register_model(e);
  e.read_ini(write("f.cfg", "[train]\nresume = yes\nout = \"a # b \"\n"));
  EXPECT_TRUE(e.get_flag("train.resume"));
  EXPECT_EQ(e.get_string("train.out"), "a # b ");
}

TEST_F(ConfigTest, AliasIsACommandLineSpellingOfTheSameOption) {
  Config c;
  register_model(c);
  c.add_alias("lr", "train.lr");
  ASSERT_TRUE(parse_args(c, {"--lr", "0.5"}));
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 0.5);
  EXPECT_TRUE(c.is_set("train.lr"));
  Config d;
  register_model(d);
  d.add_alias("lr", "train.lr");
  EXPECT_EQ(error_of([&] { parse_args(d, {"--lr=2"}); }), "--lr: 2 is out of range [0, 1]");
  // INI files use the full name only: the alias is unknown there.
  std::string f = write("a.cfg", "lr = 0.1\n");
  EXPECT_EQ(error_of([&] { d.read_ini(f); }), f + ":1: unknown option 'lr' (did you mean 'seed'?)");
  EXPECT_NE(d.help().find("--train.lr FLOAT"), std::string::npos);
  EXPECT_NE(d.help().find("; also --lr)"), std::string::npos);
}

TEST_F(ConfigTest, DumpIniReadsBackToTheSameValues) {
  Config a;
  register_model(a);
  ASSERT_TRUE(parse_args(a, {"--model.d_model=300", "--train.lr=0.1", "--train.out=", "--train.resume", "--model.lod=5,-6",
                        "--device=cpu"}));
  std::string ini = a.dump_ini();
  EXPECT_EQ(ini,
            "# vlm options (read back with --config FILE)\n"
            "device = cpu\nseed = 1234\n\n[model]\nd_model = 300\nn_layer = 12\nlod = 5,-6\n\n"
            "[train]\nlr = 0.1\nout = \"\"\nresume = true\n");
  Config b;
  register_model(b);
  b.read_ini(write("dump.cfg", ini));
  EXPECT_EQ(b.dump_ini(), ini);
  EXPECT_EQ(b.get_float("train.lr"), 0.1);
  EXPECT_EQ(b.get_string("train.out"), "");
  EXPECT_EQ(b.get_int_list("model.lod"), (std::vector<int64_t>{5, -6}));

  // set_only: the options given, the others left unset when read back.
  EXPECT_EQ(a.dump_ini(true),
            "# vlm options (read back with --config FILE)\n"
            "device = cpu\n\n[model]\nd_model = 300\nlod = 5,-6\n\n"
            "[train]\nlr = 0.1\nout = \"\"\nresume = true\n");
  Config e;
  register_model(e);
  e.read_ini(write("dump_set.cfg", a.dump_ini(true)));
  EXPECT_EQ(e.dump_ini(), ini);
  EXPECT_TRUE(e.is_set("model.d_model"));
  EXPECT_FALSE(e.is_set("model.n_layer"));
  EXPECT_FALSE(e.is_set("seed"));

  // Values the reader would cut at a comment are quoted: '#' or ';' first, or after a tab.
  for (const std::string v : {"#abc", ";x", "a\t;b", "a #b"}) {
    Config c;
    register_model(c);
    ASSERT_TRUE(parse_args(c, {"--train.out=" + v}));
    Config d;
    register_model(d);
    d.read_ini(write("dump2.cfg", c.dump_ini()));
    EXPECT_EQ(d.get_string("train.out"), v);
  }
}

TEST_F(ConfigTest, HelpListsEveryOptionWithDefaultAndRange) {
  Config c("vlm train", "DATASET");
  register_model(c);
  testing::internal::CaptureStdout();
  EXPECT_FALSE(parse_args(c, {"--model.d_model=-1", "--help"}));  // --help wins over errors
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, c.help());
  EXPECT_EQ(out.rfind("usage: vlm train [options] DATASET\n", 0), 0u);
  for (const char* line :
       {"  --device auto|cpu|cuda   backend to run on: auto = cuda when a GPU is present, else cpu "
        "(default auto, one of auto, cpu, cuda)\n",
        "\n[model]\n", "  --model.d_model INT      model width (default 768, range [1, 65536])\n",
        "  --model.n_layer INT      blocks (default 12)\n",
        "  --model.lod INT,INT,...  levels of detail (default 1,2,4)\n",
        "  --train.lr FLOAT         peak learning rate (default 0.0003, range [0, 1])\n",
        "  --train.resume           resume from the latest checkpoint (default false)\n",
        "  --config FILE            read an INI file of options (repeatable)\n"})
    EXPECT_NE(out.find(line), std::string::npos) << line;
}

TEST_F(ConfigTest, PositionalsMustBeDeclared) {
  Config c("vlm x");
  register_model(c);
  EXPECT_EQ(error_of([&] { parse_args(c, {"--seed", "3", "stray"}); }),
            "unexpected argument 'stray' (vlm x takes no positional arguments; options are --name value, see --help)");
  Config d("vlm y");
  register_model(d);
  d.allow_positionals(1, "FILE");
  EXPECT_EQ(error_of([&] { parse_args(d, {"a.h5", "b.h5"}); }), "unexpected argument 'b.h5' (vlm y takes at most 1 FILE argument)");
  Config e("vlm y");
  register_model(e);
  e.allow_positionals(1, "FILE");
  ASSERT_TRUE(parse_args(e, {"a.h5"}));
  EXPECT_EQ(e.positional(), std::vector<std::string>{"a.h5"});
}

TEST_F(ConfigTest, ValuesAreBytesNotLocaleText) {
  // Non-ASCII and even invalid UTF-8 file names are kept as given, not refused by a
  // locale conversion.
  for (const std::string v : {"caf\xC3\xA9.h5", "\xF5x.h5"}) {
    Config c;
    register_model(c);
    ASSERT_TRUE(parse_args(c, {"--train.out", v}));
    EXPECT_EQ(c.get_string("train.out"), v);
    Config d;
    register_model(d);
    d.read_ini(write("u.cfg", "[train]\nout = " + v + "\n"));
    EXPECT_EQ(d.get_string("train.out"), v);
  }
}

TEST_F(ConfigTest, IniQuotesEndlessFilesAndNul) {
  Config c;
  register_model(c);
  const std::string f = write("q.cfg", "[train]\nout = \"a \"b\" c\" # note\n");
  c.read_ini(f);
  EXPECT_EQ(c.get_string("train.out"), "a \"b\" c");  // from the first to the last quote
  Config d;
  register_model(d);
  const std::string g = write("u.cfg", "[train]\nout = \"abc\n");
  EXPECT_EQ(error_of([&] { d.read_ini(g); }),
            g + ":2: unterminated quote in the value of 'out' (a value that starts with \" must end with \" on the same line)");
  const std::string h = write("t.cfg", "[train]\nout = \"a\" b\n");
  EXPECT_EQ(error_of([&] { d.read_ini(h); }), h + ":2: unexpected 'b' after the closing quote of the value of 'out'");
  const std::string n = write("n.cfg", std::string("seed = 1\nseed2 = \0\n", 20));
  EXPECT_EQ(error_of([&] { d.read_ini(n); }), n + ":2: NUL byte (not a text file?)");
  EXPECT_EQ(error_of([&] { d.read_ini("/dev/zero"); }),
            "/dev/zero: config file is larger than the limit of 4194304 bytes "
            "(of a pipe or device; give a regular file)");
  // A quote inside an unquoted value is a plain character.
  const std::string m = write("m.cfg", "[train]\nout = a\"b\n");
  Config e;
  register_model(e);
  e.read_ini(m);
  EXPECT_EQ(e.get_string("train.out"), "a\"b");
}

TEST_F(ConfigTest, IntListRange) {
  Config c;
  register_model(c);
  c.add_int_list("ids", "", "token ids", 0, INT32_MAX);
  EXPECT_EQ(error_of([&] { parse_args(c, {"--ids", "1,4294967297"}); }),
            "--ids: element 4294967297 is out of range [0, 2147483647]");
  EXPECT_EQ(error_of([&] { parse_args(c, {"--ids=-1"}); }), "--ids: element -1 is out of range [0, 2147483647]");
}

}  // namespace
}  // namespace vlm

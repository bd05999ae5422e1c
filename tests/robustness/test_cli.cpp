// Malformed command lines and INI files (base/config.h): unterminated quotes, endless or
// binary files, directories, unknown keys, stray positional arguments, values out of
// range or wrapping around (token ids above 2^32), missing values.
#include "robustness.h"

namespace vlm::robustness {
namespace {

using Cli = Robust;

// ---- INI files ----

TEST_F(Cli, IniUnterminatedQuote) {
  write("x.cfg", "[parallel]\ntp = \"2\n");
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:2", "unterminated quote", "tp"});
}

TEST_F(Cli, IniTextAfterClosingQuote) {
  write("x.cfg", "[data]\nout = \"a.h5\" b.h5\n");
  refused({"data", "build", "--config", "x.cfg"}, {"x.cfg:2", "after the closing quote", "out"});
}

TEST_F(Cli, IniEndlessInput) {
  refused({"selfcheck", "--config", "/dev/zero"}, {"/dev/zero", "larger than the limit"});
}

// A named pipe that no program writes: refused (after base/file_read.cpp's wait for a
// writer; HDF5 files at once), never waited on for ever.
TEST_F(Cli, NamedPipesWithoutAWriter) {
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  refused({"topology", "--config", "pipe"}, {"pipe: config file is a named pipe that no program wrote to"});
  refused({"data", "inspect", "pipe"}, {"pipe: not a regular file (expected an HDF5 file)"});
}

TEST_F(Cli, IniIsADirectory) {
  std::filesystem::create_directories(path("conf.d"));
  refused({"topology", "--config", "conf.d"}, {"conf.d", "is a directory"});
}

TEST_F(Cli, IniMissing) { refused({"topology", "--config", "none.cfg"}, {"none.cfg", "No such file"}); }

TEST_F(Cli, IniNulByte) {
  write("x.cfg", std::string("[parallel]\ntp = 2\0\n", 19));
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:2", "NUL byte"});
}

TEST_F(Cli, IniUnknownKey) {
  write("x.cfg", "[parallel]\ntpp = 2\n");
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:2", "parallel.tpp", "did you mean"});
}

TEST_F(Cli, IniValueOutOfRange) {
  write("x.cfg", "[parallel]\ntp = 0\n");
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:2", "parallel.tp", "out of range"});
}

TEST_F(Cli, IniBrokenSection) {
  write("x.cfg", "[parallel\ntp = 2\n");
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:1", "[section]"});
}

TEST_F(Cli, IniKeySetTwice) {
  write("x.cfg", "[parallel]\ntp = 1\ntp = 2\n");
  refused({"topology", "--config", "x.cfg"}, {"x.cfg:3", "already set on line 2"});
}

TEST_F(Cli, IniLineWithoutEquals) {
  write("x.cfg", "device cpu\n");
  refused({"selfcheck", "--config", "x.cfg"}, {"x.cfg:1", "key = value"});
}

// ---- stray positional arguments: refused where the command declares none ----

TEST_F(Cli, ExtraPositionalTopology) { refused({"topology", "extra"}, {"'extra'", "vlm topology"}); }

TEST_F(Cli, ExtraPositionalSelfcheck) { refused({"selfcheck", "extra"}, {"'extra'"}); }

TEST_F(Cli, ExtraPositionalDataBuild) {
  make_dataset("out.h5");
  refused({"data", "build", "stray", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "out.h5"},
          {"'stray'", "vlm data build"});
}

TEST_F(Cli, SecondFileForDataInspect) {
  make_dataset("a.h5");
  refused({"data", "inspect", "a.h5", "b.h5"}, {"'b.h5'", "at most 1 FILE"});
}

TEST_F(Cli, ExtraPositionalLmLogits) {
  refused({"lm", "logits", "--hf", hf_tiny("llama"), "--ids", "1,2", "--out", "out.h5", "stray"}, {"'stray'"});
}

// ---- values ----

TEST_F(Cli, TokenIdAbove2To32DoesNotWrap) {
  write("out.h5", "an earlier result");
  refused({"lm", "logits", "--hf", hf_tiny("llama"), "--ids", "1,4294967297", "--out", "out.h5"},
          {"--ids", "4294967297", "out of range"});
}

TEST_F(Cli, NegativeTokenId) {
  refused({"lm", "logits", "--hf", hf_tiny("llama"), "--ids", "-1", "--out", "out.h5"}, {"--ids", "-1"});
}

TEST_F(Cli, TokenIdOutsideTheVocabulary) {
  refused({"lm", "logits", "--hf", hf_tiny("llama"), "--ids", "1,256", "--out", "out.h5"},
          {"--ids", "256", "vocab_size=256"});
}

TEST_F(Cli, IdsNotAList) {
  refused({"lm", "logits", "--hf", hf_tiny("llama"), "--ids", "1,,2", "--out", "out.h5"}, {"--ids", "list"});
}

TEST_F(Cli, UnknownOption) {
  refused({"data", "build", "--data.fromm", "jsonl"}, {"--data.fromm", "did you mean '--data.from'"});
}

TEST_F(Cli, MissingValue) { refused({"data", "build", "--data.out"}, {"--data.out", "missing value"}); }

TEST_F(Cli, IntegerOutOfRange) {
  refused({"data", "build", "--data.limit", "-5"}, {"--data.limit", "out of range"});
}

TEST_F(Cli, FloatTooSmallForADouble) {  // it would read as 0
  refused({"data", "build", "--data.val_fraction", "1e-400"},
          {"--data.val_fraction: 1e-400 is too small for a double"});
}

TEST_F(Cli, NotANumber) {
  refused({"data", "build", "--data.max_bad_images", "nan"}, {"--data.max_bad_images"});
}

TEST_F(Cli, UnknownDataSubcommandIsOneLine) {
  refused({"data", "frobnicate"}, {"frobnicate", "vlm data --help"});
}

TEST_F(Cli, NonAsciiFileNameIsNamed) {
  write("caf\xC3\xA9.h5", "not hdf5");
  refused({"data", "inspect", "caf\xC3\xA9.h5"}, {"caf\xC3\xA9.h5", "HDF5"});
}

// Backbone sizes whose tensors would overflow a size: refused by the option's range, on
// the command line and in a Hugging Face config.json (llm/model_config.h, kMax*).
TEST_F(Cli, HugeBackboneSizesAreOutOfRange) {
  const std::string tiny = source_dir() + "/configs/tiny.cfg";
  for (const char* o : {"--model.d_ff", "--model.vocab_size", "--model.d_model", "--model.max_pos"})
    refused({"plan", "--config", tiny, "--model.vocab_size", "300", o, "9223372036854775807"},
            {std::string(o) + ": 9223372036854775807 is out of range [1, "});
  fs::copy(hf_tiny("qwen2"), path("hf"));
  std::string cfg = read_file(path("hf/config.json"));
  const std::string key = "\"intermediate_size\":";
  const size_t at = cfg.find(key);
  ASSERT_NE(at, std::string::npos) << cfg;
  cfg.insert(at + key.size(), " 288230376151711744, \"x_was\":");
  write("hf/config.json", cfg);
  refused({"lm", "logits", "--hf", "hf", "--ids", "1", "--out", "o.h5", "--device", "cpu"},
          {"hf/config.json: intermediate_size=288230376151711744: expected an integer in [1, 262144]"});
}

// Options that would be silently wrong: a file where a folder is expected, an output
// option the command does not write, AdamW settings that divide by zero.
TEST_F(Cli, OptionsThatCannotMeanWhatTheySay) {
  make_dataset("ds.h5");
  refused({"lm", "logits", "--hf", "ds.h5", "--ids", "1", "--out", "o.h5", "--device", "cpu"},
          {"--hf ds.h5: expected a Hugging Face model folder"});
  refused({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.images", "nowhere",
           "--data.out", "x.h5"},
          {"--data.images nowhere: expected the folder"});
  make_tokenizer("ds.h5");
  refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json", "--data.out", "other.h5"},
          {"--data.out other.h5: `vlm data tokenize` writes no other file"});
  const std::vector<std::string> train{"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", "ds.h5",
                                       "--data.tokenizer", "tok.json", "--train.steps", "1"};
  for (const auto& [opt, what] : {std::pair{"--train.beta1", "--train.beta1: 1 (expected below 1"},
                                  std::pair{"--train.beta2", "--train.beta2: 1 (expected below 1"}}) {
    std::vector<std::string> a = train;
    a.insert(a.end(), {opt, "1"});
    refused(a, {what});
  }
  std::vector<std::string> a = train;
  a.insert(a.end(), {"--train.eps", "0"});
  refused(a, {"--train.eps: 0 (expected above 0"});
  for (const auto& [list, what] : {std::pair{"vision,vision", "--train.freeze: 'vision' is given twice"},
                                   std::pair{"vision,,llm", "--train.freeze: 'vision,,llm' has an empty item"}}) {
    std::vector<std::string> f = train;
    f.insert(f.end(), {"--train.freeze", list});
    refused(f, {what});
  }
}

TEST_F(Cli, BadDevice) { refused({"selfcheck", "--device", "gpu"}, {"--device", "'gpu'"}); }

TEST_F(Cli, RequiredOptionMissing) {
  refused({"data", "build", "--data.out", "x.h5"}, {"--data.from", "required"});
}

}  // namespace
}  // namespace vlm::robustness

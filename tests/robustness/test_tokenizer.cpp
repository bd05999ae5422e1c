// Malformed tokenizer.json files (data/text/tokenizer.h) given to `vlm data tokenize`,
// which must leave the dataset it would rewrite unchanged: negative, huge, wrapping or
// sparse ids, empty added tokens, merges of unknown tokens, files that are not JSON,
// directories and endless inputs. Valid files are written here from the GPT-2
// byte-to-unicode table (an independent copy of the mapping).
#include "robustness.h"

namespace vlm::robustness {
namespace {

// The GPT-2 byte -> printable character mapping, as UTF-8.
std::string byte_char(int b) {
  static std::vector<uint32_t> cp = [] {
    std::vector<uint32_t> v(256);
    uint32_t extra = 0;
    for (uint32_t x = 0; x < 256; ++x) {
      const bool keep = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      v[x] = keep ? x : 256 + extra++;
    }
    return v;
  }();
  const uint32_t c = cp[size_t(b)];
  std::string s;
  if (c < 0x80) s += char(c);
  else s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3F));
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A tokenizer.json with the 256 byte tokens (ids 0..255), `extra_vocab` members after
// them, the given merges and added_tokens (JSON text of the arrays' contents).
std::string tokenizer_json(const std::string& extra_vocab = "", const std::string& merges = "",
                           const std::string& added = "", const std::string& type = "BPE") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    if (b) vocab += ",";
    vocab += quoted(byte_char(b));
    vocab += ":";
    vocab += std::to_string(b);
  }
  if (!extra_vocab.empty()) vocab += "," + extra_vocab;
  return "{\"added_tokens\": [" + added + "], \"model\": {\"type\": \"" + type + "\", \"vocab\": {" + vocab +
         "}, \"merges\": [" + merges + "]}}";
}

class Tok : public Robust {
 protected:
  void SetUp() override {
    Robust::SetUp();
    make_dataset("ds.h5");
  }
  void tokenize(const std::string& tok_text, const std::vector<std::string>& needles) {
    write("tok.json", tok_text);
    refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, needles);
  }
};

TEST_F(Tok, ValidFileIsAccepted) {  // the base of every case below loads
  write("tok.json", tokenizer_json(quoted("ab") + ":256", quoted("a b")));
  const RunResult r = run_vlm({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, dir_);
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(Tok, NegativeAddedTokenId) {
  tokenize(tokenizer_json("", "", R"({"id": -5, "content": "<x>"})"), {"tok.json", "added_tokens[0].id=-5"});
}

TEST_F(Tok, VocabIdAbove2To32) {
  tokenize(tokenizer_json(quoted("ab") + ":4294967297"), {"tok.json", "4294967297", "expected an integer"});
}

TEST_F(Tok, AddedTokenIdAbove2To63) {
  tokenize(tokenizer_json("", "", R"({"id": 99999999999999999999, "content": "<x>"})"),
           {"tok.json", "added_tokens[0].id"});
}

TEST_F(Tok, SparseIds) {
  tokenize(tokenizer_json(quoted("ab") + ":9000000"), {"tok.json", "9000000", "dense"});
}

TEST_F(Tok, DuplicateId) {
  tokenize(tokenizer_json(quoted("ab") + ":7"), {"tok.json", "id 7 appears twice"});
}

TEST_F(Tok, FractionalId) { tokenize(tokenizer_json(quoted("ab") + ":256.5"), {"tok.json", "256.5"}); }

TEST_F(Tok, EmptyAddedToken) {
  tokenize(tokenizer_json("", "", R"({"id": 256, "content": ""})"), {"tok.json", "added_tokens[0].content"});
}

TEST_F(Tok, AddedTokenWithoutContent) {
  tokenize(tokenizer_json("", "", R"({"id": 256})"), {"tok.json", "added_tokens[0]", "content"});
}

TEST_F(Tok, MergeOfUnknownTokens) {
  tokenize(tokenizer_json("", quoted("a b")), {"tok.json", "merge 'a b'"});
}

TEST_F(Tok, MergeNotAPair) { tokenize(tokenizer_json("", quoted("a b c")), {"tok.json", "merge 'a b c'"}); }

TEST_F(Tok, MissingByteTokens) {
  tokenize(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", {"tok.json", "byte 0 has no token"});
}

TEST_F(Tok, NotByteLevel) {
  tokenize(tokenizer_json(quoted("\xE2\x82\xAC") + ":256"), {"tok.json", "not byte-level"});
}

TEST_F(Tok, WordPieceModel) { tokenize(tokenizer_json("", "", "", "WordPiece"), {"tok.json", "BPE"}); }

// Settings that change how text encodes and that the tokenizer does not implement are
// refused, not ignored; GPT-2's and Qwen2's own settings load.
TEST_F(Tok, SettingsNotImplemented) {
  const std::string base = tokenizer_json();
  const auto in_root = [&](const std::string& field) { return "{" + field + ", " + base.substr(1); };
  const auto in_model = [&](const std::string& field) {
    std::string t = base;
    return t.replace(t.find("\"model\": {"), 10, "\"model\": {" + field + ", ");
  };
  tokenize(in_root(R"("normalizer": {"type": "Lowercase"})"), {"tok.json: normalizer 'Lowercase' is not supported"});
  tokenize(in_root(R"("pre_tokenizer": {"type": "Whitespace"})"), {"tok.json: pre_tokenizer 'Whitespace'"});
  tokenize(in_root(R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"}]})"),
           {"tok.json: pre_tokenizer 'Digits'"});
  tokenize(in_model(R"("dropout": 0.5)"), {"tok.json: model.dropout"});
  tokenize(in_model(R"("byte_fallback": true)"), {"tok.json: model.byte_fallback"});
  tokenize(in_model(R"("continuing_subword_prefix": "##")"), {"tok.json: model.continuing_subword_prefix"});
  for (const std::string& ok :
       {in_root(R"("normalizer": {"type": "NFC"}, "pre_tokenizer": {"type": "ByteLevel"})"),
        in_model(R"("dropout": null, "byte_fallback": false, "continuing_subword_prefix": "", "unk_token": null)")}) {
    write("tok.json", ok);
    const RunResult r = run_vlm({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, dir_);
    EXPECT_EQ(r.code, 0) << ok << "\n" << r.err;
  }
}

TEST_F(Tok, NotJson) { tokenize("{\"model\": ", {"tok.json", "JSON error"}); }

TEST_F(Tok, NotAnObject) { tokenize("[1, 2]", {"tok.json", "object"}); }

TEST_F(Tok, DuplicateVocabKey) {
  tokenize(tokenizer_json(quoted("ab") + ":256," + quoted("ab") + ":257"), {"tok.json", "duplicate key"});
}

TEST_F(Tok, TokenizerIsADirectory) {
  std::filesystem::create_directories(path("tokdir"));
  refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "tokdir"}, {"tokdir", "is a directory"});
}

TEST_F(Tok, EndlessTokenizerFile) {
  refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "/dev/zero"}, {"/dev/zero", "larger than the limit"});
}

TEST_F(Tok, TrainingOnABrokenDatasetKeepsTheOldTokenizer) {
  write("tok.json", tokenizer_json());
  write("bad.h5", "not hdf5");
  refused({"data", "tokenizer", "--data.train", "bad.h5", "--data.vocab", "300", "--data.out", "tok.json"},
          {"bad.h5", "HDF5"});
}

// A dataset names its tokenizer by the path from its own folder (`vlm data build` and
// `vlm data tokenize` write it so), so a run finds it from any working directory and after
// the two files move together; a name found nowhere is one line naming it.
TEST_F(Tok, ADatasetFindsItsTokenizerFromAnyFolder) {
  make_dataset("ds.h5");
  fs::create_directories(path("sub"));
  fs::create_directories(path("elsewhere"));
  const auto ok = [](const RunResult& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  ok(run_vlm({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "270", "--data.out", "sub/tok.json"},
             dir_));
  ok(run_vlm({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "sub/x.h5",
              "--data.tokenizer", "sub/tok.json"},
             dir_));
  ok(run_vlm({"data", "tokenize", "ds.h5", "--data.tokenizer", "sub/tok.json"}, dir_));
  EXPECT_NE(ok(run_vlm({"data", "inspect", "sub/x.h5"}, dir_)).find("tokens: present (tok.json)"), std::string::npos);
  EXPECT_NE(ok(run_vlm({"data", "inspect", "ds.h5"}, dir_)).find("tokens: present (sub/tok.json)"), std::string::npos);

  const std::string tiny = source_dir() + "/configs/tiny.cfg";
  const auto plan = [&](const std::string& data, const std::string& cwd) {
    return run_vlm({"plan", "--config", tiny, "--train.steps", "1", "--data.path", data}, cwd);
  };
  ok(plan("../sub/x.h5", path("elsewhere")));
  ok(plan("../ds.h5", path("elsewhere")));
  ok(plan("x.h5", path("sub")));
  fs::rename(path("sub"), path("moved"));
  ok(plan("../moved/x.h5", path("elsewhere")));
  fs::remove(path("moved/tok.json"));
  const RunResult r = plan("moved/x.h5", dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("moved/x.h5 names tok.json, found neither beside it nor here"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlm::robustness

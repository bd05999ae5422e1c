// Tokenizer: pre-tokeniser pieces against the GPT-2 / Qwen2 regex results worked out by
// hand, round trip text -> ids -> text on every caption of the Fashion-MNIST and Tux Paint
// subsets, save/load identity, and a hand-written tokenizer.json with known merges.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "data/convert/converters.h"
#include "data/text/tokenizer.h"
#include "test_util.h"

using namespace vlm;
namespace fs = std::filesystem;

namespace {
std::vector<std::string> pieces(const std::string& s, PreTokenizer m, int digits = 1) {
  std::vector<std::string> out;
  for (const auto& r : pretokenize(s, m, digits)) out.push_back(s.substr(r.begin, r.end - r.begin));
  return out;
}

std::vector<std::string> subset_captions() {
  std::vector<std::string> caps;
  for (int label = 0; label < 10; ++label)
    for (int i = 0; i < 20; ++i) caps.push_back(fashion_caption(label, i));
  if (test::have_tuxpaint()) {
    std::vector<std::string> txts;
    for (const auto& e : fs::recursive_directory_iterator(test::kTuxDir))
      if (e.path().extension() == ".txt") txts.push_back(e.path().string());
    std::sort(txts.begin(), txts.end());
    for (size_t k = 0; k < txts.size() && k < 120; ++k) {
      const std::string t = test::read_file(txts[k]);
      caps.push_back(t.substr(0, t.find('\n')));
      // Second line: a translation (non-ASCII scripts exercise the byte fallback).
      const size_t nl = t.find('\n');
      if (nl != std::string::npos) caps.push_back(t.substr(nl + 1, t.find('\n', nl + 1) - nl - 1));
    }
  }
  return caps;
}

// GPT-2's bytes_to_unicode, written out independently of data/text/tokenizer.cpp.
std::string gpt2_char(int b) {
  std::vector<int> bs;
  for (int c = '!'; c <= '~'; ++c) bs.push_back(c);
  for (int c = 0xA1; c <= 0xAC; ++c) bs.push_back(c);
  for (int c = 0xAE; c <= 0xFF; ++c) bs.push_back(c);
  int cp = b, n = 0;
  if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
    for (int c = 0; c < 256; ++c) {
      if (std::find(bs.begin(), bs.end(), c) != bs.end()) continue;
      if (c == b) cp = 256 + n;
      ++n;
    }
  }
  std::string s;
  if (cp < 0x80) s += char(cp);
  else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  return s;
}

std::string tiny_json(const std::string& pre_tokenizer) {
  std::string v;
  for (int b = 0; b < 256; ++b) {
    std::string c = gpt2_char(b);
    if (c == "\"" || c == "\\") c = "\\" + c;
    v += "\"" + c + "\": " + std::to_string(b) + ", ";
  }
  v += "\"\xC4\xA0t\": 256, \"he\": 257, \"\xC4\xA0the\": 258, \"12\": 259";
  return R"({"added_tokens": [{"id": 260, "content": "<|endoftext|>", "special": true}],
            "pre_tokenizer": )" + pre_tokenizer + R"(,
            "model": {"type": "BPE", "vocab": {)" + v + R"(},
            "merges": ["Ġ t", "h e", ["Ġt", "he"], "1 2"]}})";
}
}  // namespace

TEST(Pretokenize, Gpt2Pattern) {
  EXPECT_EQ(pieces("Hello world's  test 123!!\n", PreTokenizer::Gpt2),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " test", " 123", "!!", "\n"}));
  EXPECT_EQ(pieces("caf\xC3\xA9 \xE2\x80\x94 ok", PreTokenizer::Gpt2),
            (std::vector<std::string>{"caf\xC3\xA9", " \xE2\x80\x94", " ok"}));
  EXPECT_EQ(pieces("I'LL go\n\nnow", PreTokenizer::Gpt2),
            (std::vector<std::string>{"I", "'", "LL", " go", "\n", "\n", "now"}));
}

TEST(Pretokenize, Qwen2Pattern) {
  EXPECT_EQ(pieces("Hello world's  test 123!!\n", PreTokenizer::Qwen2),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " test", " ", "1", "2", "3", "!!\n"}));
  EXPECT_EQ(pieces("I'LL go\n\nnow", PreTokenizer::Qwen2),
            (std::vector<std::string>{"I", "'LL", " go", "\n\n", "now"}));
  EXPECT_EQ(pieces("(x) 2024", PreTokenizer::Qwen2, 3),
            (std::vector<std::string>{"(x", ")", " ", "202", "4"}));
}

TEST(Tokenizer, TrainRoundTripSaveLoad) {
  const std::vector<std::string> caps = subset_captions();
  const Tokenizer tok = Tokenizer::train(caps, 600);
  EXPECT_LE(tok.vocab_size(), 600);
  EXPECT_GT(tok.num_merges(), 100);
  size_t bytes = 0, ids = 0;
  for (const std::string& c : caps) {
    const auto t = tok.encode(c, true, true);
    ASSERT_EQ(t.front(), tok.bos());
    ASSERT_EQ(t.back(), tok.eos());
    ASSERT_EQ(tok.decode(t), c);
    bytes += c.size(), ids += t.size() - 2;
  }
  EXPECT_LT(ids * 2, bytes);  // trained merges compress the training captions
  // Special tokens are matched in text and never split.
  const auto sp = tok.encode("<image> A coat.");
  EXPECT_EQ(sp.front(), tok.image());
  EXPECT_EQ(tok.decode(sp, false), "<image> A coat.");
  EXPECT_EQ(tok.decode(sp, true), " A coat.");

  const std::string path = test::scratch_dir("tok") + "/tok.json";
  tok.save(path);
  const Tokenizer back = Tokenizer::load(path);
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  EXPECT_EQ(back.bos(), tok.bos());
  EXPECT_EQ(back.image(), tok.image());
  for (const std::string& c : caps) ASSERT_EQ(back.encode(c), tok.encode(c)) << c;
}

TEST(Tokenizer, HandWrittenTokenizerJson) {
  const Tokenizer t = Tokenizer::from_json(tiny_json(R"({"type": "ByteLevel", "add_prefix_space": false})"), "tiny");
  EXPECT_EQ(t.encode(" the"), (std::vector<int32_t>{258}));
  EXPECT_EQ(t.encode("the"), (std::vector<int32_t>{'t', 257}));
  EXPECT_EQ(t.encode(" then"), (std::vector<int32_t>{258, 'n'}));
  EXPECT_EQ(t.encode(" 123"), (std::vector<int32_t>{0x20, 259, '3'}));
  EXPECT_EQ(t.encode("a<|endoftext|>"), (std::vector<int32_t>{'a', 260}));
  // <|endoftext|> serves as bos/eos/pad; the image tokens are appended after it.
  EXPECT_EQ(t.bos(), 260);
  EXPECT_EQ(t.eos(), 260);
  EXPECT_EQ(t.pad(), 260);
  EXPECT_EQ(t.image(), 261);
  EXPECT_EQ(t.vocab_size(), 264);
  EXPECT_EQ(t.decode({258, 'n', 260}), " then");

  // Qwen2-style Split regex: digits are single pieces, so "12" never merges.
  const std::string split = R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"}, {"type": "ByteLevel"}]})";
  const Tokenizer q = Tokenizer::from_json(tiny_json(split), "tiny-qwen");
  EXPECT_EQ(q.pretokenizer(), PreTokenizer::Qwen2);
  EXPECT_EQ(q.encode(" 123"), (std::vector<int32_t>{0x20, '1', '2', '3'}));
  EXPECT_EQ(q.encode(" the"), (std::vector<int32_t>{258}));
}

TEST(Tokenizer, RejectsNonByteLevel) {
  EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "WordPiece", "vocab": {}}})", "x"), UserError);
  EXPECT_THROW(Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "x"),
               UserError);
}

// Malformed Hugging Face checkpoints given to `vlm lm logits`: safetensors files that
// break the format's rules (holes, overlaps, trailing bytes, header length and start,
// sizes, dtypes, duplicate names) and config.json values that do not fit their type
// (2^32 layers, rope_theta=1e300), contradict each other or need more memory than there
// is. The tiny Llama fixture (tests/data/hf_tiny/llama) is copied and edited per case
// with base/json; an existing --out file must survive every failure.
#include <algorithm>

#include "base/json.h"
#include "robustness.h"

namespace vlm::robustness {
namespace {

struct Safetensors {
  json::Value header;
  std::string data;
};

Safetensors load_st(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(n >> (8 * i));
  return s;
}

std::string st_bytes(const std::string& header_text, const std::string& data) {
  return le64(header_text.size()) + header_text + data;
}

json::Value& member(json::Value& obj, const std::string& key) {
  for (auto& [k, v] : obj.mutable_object())
    if (k == key) return v;
  return obj.set(key, json::Value());
}

void erase(json::Value& obj, const std::string& key) {
  auto& m = obj.mutable_object();
  m.erase(std::remove_if(m.begin(), m.end(), [&](const auto& kv) { return kv.first == key; }), m.end());
}

int64_t offset(const json::Value& t, int k) { return t.at("data_offsets").as_array()[size_t(k)].as_int(); }

void set_offsets(json::Value& t, int64_t b, int64_t e) {
  member(t, "data_offsets") = json::Value::array({json::Value::integer(b), json::Value::integer(e)});
}

class Ckpt : public Robust {
 protected:
  void SetUp() override {
    Robust::SetUp();
    write("ck/config.json", read_file(hf_tiny("llama") + "/config.json"));
    write("ck/model.safetensors", read_file(hf_tiny("llama") + "/model.safetensors"));
    write("out.h5", "logits of an earlier run");
  }
  RunResult logits(const std::vector<std::string>& needles, const std::string& ids = "1,2") {
    return refused({"lm", "logits", "--hf", "ck", "--ids", ids, "--out", "out.h5", "--device", "cpu"}, needles);
  }
  Safetensors st() const { return load_st(read_file(path("ck/model.safetensors"))); }
  void save(const Safetensors& s) { write("ck/model.safetensors", st_bytes(json::write(s.header), s.data)); }
  json::Value config() const { return json::parse(read_file(path("ck/config.json"))); }
  void save(const json::Value& c) { write("ck/config.json", json::write(c)); }
  // Shifts every tensor at or after byte `at` of the data area by `by` bytes.
  static void shift_from(Safetensors& s, int64_t at, int64_t by) {
    for (auto& [name, t] : s.header.mutable_object())
      if (name != "__metadata__" && offset(t, 0) >= at) set_offsets(t, offset(t, 0) + by, offset(t, 1) + by);
  }
};

// ---- safetensors: the format's rules ----

TEST_F(Ckpt, HoleBetweenTensors) {
  Safetensors s = st();
  shift_from(s, 65536, 8);
  s.data.insert(65536, 8, '\0');
  save(s);
  logits({"ck/model.safetensors", "8 bytes of the data area", "holes"});
}

TEST_F(Ckpt, UnindexedTrailingBytes) {
  Safetensors s = st();
  s.data += std::string(16, '\0');
  save(s);
  logits({"ck/model.safetensors", "the last 16 bytes", "holes"});
}

TEST_F(Ckpt, OverlappingTensors) {
  Safetensors s = st();
  set_offsets(member(s.header, "model.embed_tokens.weight"), 0, 65536);  // same bytes as lm_head
  save(s);
  logits({"ck/model.safetensors", "overlapping"});
}

TEST_F(Ckpt, HeaderLengthPastTheEnd) {
  std::string b = read_file(path("ck/model.safetensors"));
  b.replace(0, 8, le64(b.size()));
  write("ck/model.safetensors", b);
  logits({"ck/model.safetensors", "runs past the end of the file"});
}

TEST_F(Ckpt, HeaderLengthAboveTheLimit) {
  std::string b = read_file(path("ck/model.safetensors"));
  b.replace(0, 8, le64(uint64_t(200) << 20));
  write("ck/model.safetensors", b);
  logits({"ck/model.safetensors", "exceeds the limit"});
}

TEST_F(Ckpt, HeaderNotStartingWithABrace) {
  Safetensors s = st();
  std::string h = " ";
  h += json::write(s.header);
  write("ck/model.safetensors", st_bytes(h, s.data));
  logits({"ck/model.safetensors", "must start with '{'"});
}

TEST_F(Ckpt, HeaderNotUtf8) {
  Safetensors s = st();
  std::string h = json::write(s.header);
  const size_t at = h.find("lm_head");
  ASSERT_NE(at, std::string::npos);
  h[at] = '\xFF';
  write("ck/model.safetensors", st_bytes(h, s.data));
  logits({"ck/model.safetensors", "UTF-8"});
}

TEST_F(Ckpt, DuplicateTensorName) {
  Safetensors s = st();
  std::string h = json::write(s.header);
  const std::string entry = "\"lm_head.weight\":" + json::write(s.header.at("lm_head.weight"));
  h.insert(h.size() - 1, "," + entry);
  write("ck/model.safetensors", st_bytes(h, s.data));
  logits({"ck/model.safetensors", "duplicate key 'lm_head.weight'"});
}

TEST_F(Ckpt, ShapeDisagreesWithTheBytes) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "shape") =
      json::Value::array({json::Value::integer(255), json::Value::integer(64)});
  save(s);
  logits({"ck/model.safetensors", "lm_head.weight", "bytes in data_offsets"});
}

TEST_F(Ckpt, NegativeDimension) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "shape") =
      json::Value::array({json::Value::integer(-256), json::Value::integer(-64)});
  save(s);
  logits({"ck/model.safetensors", "negative dimension"});
}

TEST_F(Ckpt, FractionalOffset) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "data_offsets") =
      json::Value::array({json::Value::number(0.5), json::Value::integer(65536)});
  save(s);
  logits({"ck/model.safetensors", "data_offsets[0]"});
}

TEST_F(Ckpt, UnknownDtype) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "dtype") = json::Value::string("Q4");
  save(s);
  logits({"ck/model.safetensors", "unknown dtype 'Q4'"});
}

TEST_F(Ckpt, IntegerTensorWhereFloatsBelong) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "dtype") = json::Value::string("I32");
  save(s);
  logits({"lm_head.weight", "not a float type"});
}

TEST_F(Ckpt, ExtraKeyInAnEntry) {
  Safetensors s = st();
  member(s.header, "lm_head.weight").set("x", json::Value::integer(1));
  save(s);
  logits({"ck/model.safetensors", "unexpected key 'x'"});
}

TEST_F(Ckpt, MetadataValueNotAString) {
  Safetensors s = st();
  member(member(s.header, "__metadata__"), "format") = json::Value::integer(1);
  save(s);
  logits({"ck/model.safetensors", "__metadata__ 'format'"});
}

TEST_F(Ckpt, FileShorterThanItsLength) {
  write("ck/model.safetensors", "abc");
  logits({"ck/model.safetensors", "too short"});
}

TEST_F(Ckpt, TensorMissing) {
  Safetensors s = st();
  const json::Value& t = s.header.at("model.norm.weight");
  const int64_t b = offset(t, 0), e = offset(t, 1);
  erase(s.header, "model.norm.weight");
  s.data.erase(size_t(b), size_t(e - b));
  shift_from(s, e, b - e);
  save(s);
  logits({"ck", "model.norm.weight", "missing"});
}

TEST_F(Ckpt, TensorShapeDiffersFromTheConfig) {
  Safetensors s = st();
  member(member(s.header, "lm_head.weight"), "shape") =
      json::Value::array({json::Value::integer(128), json::Value::integer(128)});
  save(s);
  logits({"lm_head.weight", "shape"});
}

TEST_F(Ckpt, IndexPointsOutsideTheFolder) {
  std::filesystem::remove(path("ck/model.safetensors"));
  write("ck/model.safetensors.index.json", R"({"weight_map": {"lm_head.weight": "../model.safetensors"}})");
  logits({"model.safetensors.index.json", "plain file name"});
}

TEST_F(Ckpt, IndexNotJson) {
  write("ck/model.safetensors.index.json", "{\"weight_map\": ");
  logits({"model.safetensors.index.json", "JSON error"});
}

TEST_F(Ckpt, NoWeights) {
  std::filesystem::remove(path("ck/model.safetensors"));
  logits({"ck", "neither model.safetensors nor model.safetensors.index.json"});
}

// ---- config.json: values that do not fit, contradict, or cannot be allocated ----

TEST_F(Ckpt, LayersAbove2To32DoNotWrap) {
  json::Value c = config();
  member(c, "num_hidden_layers") = json::Value::integer((int64_t(1) << 32) + 2);
  save(c);
  logits({"ck/config.json", "num_hidden_layers=4294967298", "expected an integer"});
}

TEST_F(Ckpt, RopeThetaBeyondFloat) {
  json::Value c = config();
  member(member(c, "rope_parameters"), "rope_theta") = json::Value::number(1e300);
  save(c);
  logits({"ck/config.json", "rope_theta=1e+300"});
}

TEST_F(Ckpt, KvHeadsDoNotDivideHeads) {
  json::Value c = config();
  member(c, "num_key_value_heads") = json::Value::integer(3);
  save(c);
  logits({"ck/config.json", "num_key_value_heads=3 must divide num_attention_heads=4"});
}

TEST_F(Ckpt, TpAboveTheWorldIsRefusedFirst) {
  refused({"lm", "logits", "--hf", "ck", "--ids", "1,2", "--out", "out.h5", "--device", "cpu", "--tp", "3"},
          {"parallel.tp=3 does not divide the world size 1"});
}

TEST_F(Ckpt, ModelLargerThanMemory) {
  json::Value c = config();
  member(c, "vocab_size") = json::Value::integer(1 << 24);  // the largest accepted (llm/model_config.h)
  member(c, "hidden_size") = json::Value::integer(1 << 18);
  erase(c, "head_dim");
  save(c);
  logits({"arena", "model.embed_tokens.weight", "GiB", "memory available"});
}

TEST_F(Ckpt, HiddenSizeNotDivisibleByHeads) {
  json::Value c = config();
  member(c, "hidden_size") = json::Value::integer(66);
  save(c);
  logits({"ck/config.json", "hidden_size=66 is not divisible by num_attention_heads=4"});
}

TEST_F(Ckpt, OddHeadSize) {
  json::Value c = config();
  member(c, "hidden_size") = json::Value::integer(12);
  erase(c, "head_dim");
  save(c);
  logits({"ck/config.json", "even head size"});
}

TEST_F(Ckpt, NegativeNormEps) {
  json::Value c = config();
  member(c, "rms_norm_eps") = json::Value::number(-1.0);
  save(c);
  logits({"ck/config.json", "rms_norm_eps=-1"});
}

TEST_F(Ckpt, HiddenSizeAsAString) {
  json::Value c = config();
  member(c, "hidden_size") = json::Value::string("64");
  save(c);
  logits({"ck/config.json", "hidden_size"});
}

TEST_F(Ckpt, MissingKey) {
  json::Value c = config();
  erase(c, "hidden_size");
  save(c);
  logits({"ck/config.json", "missing key 'hidden_size'"});
}

TEST_F(Ckpt, UnsupportedModelType) {
  json::Value c = config();
  member(c, "model_type") = json::Value::string("gpt_neox");
  save(c);
  logits({"ck/config.json", "model_type", "gpt_neox"});
}

TEST_F(Ckpt, MoreTokensThanPositions) {
  json::Value c = config();
  member(c, "max_position_embeddings") = json::Value::integer(1);
  save(c);
  logits({"--ids", "max_position_embeddings=1"});
}

TEST_F(Ckpt, ConfigNotJson) {
  write("ck/config.json", "{\"model_type\": \"llama\",");
  logits({"ck/config.json", "JSON error"});
}

TEST_F(Ckpt, ConfigIsADirectory) {
  std::filesystem::remove(path("ck/config.json"));
  std::filesystem::create_directories(path("ck/config.json"));
  logits({"ck/config.json", "is a directory"});
}

TEST_F(Ckpt, ConfigMissing) {
  std::filesystem::remove(path("ck/config.json"));
  logits({"ck/config.json", "not found"});
}

}  // namespace
}  // namespace vlm::robustness

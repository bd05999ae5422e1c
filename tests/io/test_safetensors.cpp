// Tests of base/json (strict parser, writer) and io/safetensors (reader, per-rank
// slices, sharded index, writer, refusal of malformed headers). Malformed files are
// written byte by byte here; each must be refused with a UserError naming the file and
// the problem. The transformers-written fixtures (tests/data/hf_tiny, made by
// tools/make_hf_tiny.py) check compatibility with the reference implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "io/safetensors.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

using test::error_of;

namespace fs = std::filesystem;

// ---- JSON ----------------------------------------------------------------------------

TEST(Json, ParsesValuesEscapesAndNumbers) {
  json::Value v = json::parse(R"( {"a": [1, -2.5e3, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00",
                                   "big": 9223372036854775807, "huge": 1e300, "neg0": -0} )");
  const auto& a = v.at("a").as_array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_TRUE(a[0].is_int());
  EXPECT_EQ(a[0].as_int(), 1);
  EXPECT_FALSE(a[1].is_int());
  EXPECT_DOUBLE_EQ(a[1].as_double(), -2500.0);
  EXPECT_TRUE(a[2].as_bool());
  EXPECT_FALSE(a[3].as_bool());
  EXPECT_TRUE(a[4].is_null());
  EXPECT_EQ(v.at("s").as_string(), "x\"\\/\n\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(v.at("big").as_int(), INT64_MAX);
  EXPECT_DOUBLE_EQ(v.at("huge").as_double(), 1e300);
  EXPECT_EQ(v.find("nope"), nullptr);
  EXPECT_NE(error_of([&] { (void)v.at("nope", "cfg"); }).find("missing key 'nope'"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)v.at("s").as_int("s"); }).find("expected a JSON number"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)a[1].as_int("a[1]"); }).find("expected an integer"), std::string::npos);
}

TEST(Json, RefusesMalformedInputWithByteOffset) {
  struct Case { const char* text; const char* what; };
  const Case cases[] = {
      {"[1,2,]", "invalid value"},
      {"{\"a\":1,}", "expected a string key"},
      {"01", "leading zero"},
      {"1.", "digit after '.'"},
      {"\"abc", "unterminated string"},
      {"\"a\x01\"", "control character"},
      {"\"\\ud800\"", "surrogate"},
      {"\"\\udc00\"", "unpaired low surrogate"},
      {"\"\\x\"", "invalid escape"},
      {"{\"a\":1,\"a\":2}", "duplicate key"},
      {"[1] 2", "unexpected data"},
      {"nul", "invalid literal"},
      {"NaN", "invalid value"},
      {"\"\xC3\"", "UTF-8"},
      {"", "unexpected end"},
      {"1e999", "out of range"},
  };
  for (const auto& c : cases) {
    std::string msg = error_of([&] { json::parse(c.text, "t.json"); });
    EXPECT_NE(msg.find("t.json: JSON error at byte "), std::string::npos) << c.text << " -> " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.text << " -> " << msg;
  }
  EXPECT_NE(error_of([] { json::parse("[1, 2, x]", "t"); }).find("at byte 7"), std::string::npos);
}

TEST(Json, EnforcesDepthAndSizeLimits) {
  json::Limits lim;
  lim.max_depth = 4;
  EXPECT_NO_THROW(json::parse("[[[[1]]]]", "t", lim));
  EXPECT_NE(error_of([&] { json::parse("[[[[[1]]]]]", "t", lim); }).find("nesting deeper than 4"), std::string::npos);
  std::string deep(100000, '[');  // the default limit stops this long before the stack would
  EXPECT_NE(error_of([&] { json::parse(deep, "t"); }).find("nesting deeper"), std::string::npos);
  lim.max_bytes = 8;
  EXPECT_NE(error_of([&] { json::parse("[1,2,3,4,5]", "t", lim); }).find("exceeds the limit"), std::string::npos);
}

TEST(Json, WriterRoundTrips) {
  using json::Value;
  Value o = Value::object();
  o.set("name", Value::string("q\"\n\x01\xC3\xA9"));
  o.set("shape", Value::array({Value::integer(3), Value::integer(-4)}));
  o.set("x", Value::number(0.1));
  o.set("ok", Value::boolean(true));
  o.set("none", Value::null());
  std::string text = json::write(o);
  EXPECT_EQ(text, "{\"name\":\"q\\\"\\n\\u0001\xC3\xA9\",\"shape\":[3,-4],\"x\":0.1,\"ok\":true,\"none\":null}");
  Value back = json::parse(text);
  EXPECT_EQ(back.at("name").as_string(), o.at("name").as_string());
  EXPECT_EQ(back.at("x").as_double(), 0.1);
  EXPECT_EQ(json::write(back), text);
  EXPECT_THROW(json::write(Value::number(1.0 / 0.0)), UserError);
}

// ---- safetensors: round trip and slices ------------------------------------------------

std::vector<float> iota_values(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * float(i) - 3.25f + 1e-3f * float(i * i % 7);
  return v;
}

// The slice [b, e) of dimension d (0 or 1) of a row-major [R, Cn] matrix.
std::vector<float> slice2d(const std::vector<float>& m, int64_t R, int64_t Cn, int d, int64_t b, int64_t e) {
  std::vector<float> out;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < Cn; ++j)
      if ((d == 0 ? i : j) >= b && (d == 0 ? i : j) < e) out.push_back(m[size_t(i * Cn + j)]);
  return out;
}

TEST(Safetensors, RoundTripAndPerRankSlices) {
  fs::path dir = test::scratch_dir("st_rt");
  const std::string path = (dir / "m.safetensors").string();
  std::vector<StWriteTensor> ts = {
      {"w.col", {12, 6}, iota_values(72, 0.5f), DType::F32},
      {"a.row", {4, 12}, iota_values(48, -0.25f), DType::BF16},
      {"bias", {12}, iota_values(12, 2.f), DType::F32},
      {"scalar", {}, {7.5f}, DType::F32},
      {"empty", {0, 3}, {}, DType::F32},
  };
  write_safetensors(path, ts, {{"format", "pt"}});

  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.tensors()[0].name, "a.row");  // sorted by name
  EXPECT_EQ(f.info("a.row").dtype, StDType::BF16);
  // Data area starts 8-byte aligned; f32 tensors first, then bf16.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_LT(f.info("w.col").begin, f.info("a.row").begin);

  for (const auto& t : ts) {
    std::vector<float> want = t.values;
    if (t.dtype == DType::BF16)
      for (float& x : want) x = bf16_to_f32(f32_to_bf16(x));
    if (t.shape.empty()) want = {7.5f};
    EXPECT_EQ(f.read_f32(t.name), want) << t.name;
  }
  // Rank r of tp reads exactly its block of the full tensor, for both split dims.
  const std::vector<float> full = f.read_f32("w.col");
  for (int tp : {1, 2, 3, 6})
    for (int d : {0, 1}) {
      const int64_t extent = d == 0 ? 12 : 6, part = extent / tp;
      for (int r = 0; r < tp; ++r)
        EXPECT_EQ(f.read_slice_f32("w.col", d, r * part, (r + 1) * part),
                  slice2d(full, 12, 6, d, r * part, (r + 1) * part))
            << "tp " << tp << " dim " << d << " rank " << r;
    }
  const std::vector<float> fb = f.read_f32("a.row");
  EXPECT_EQ(f.read_slice_f32("a.row", 1, 3, 9), slice2d(fb, 4, 12, 1, 3, 9));
  EXPECT_EQ(f.read_slice_f32("bias", 0, 4, 8),
            std::vector<float>(ts[2].values.begin() + 4, ts[2].values.begin() + 8));
  EXPECT_NE(error_of([&] { f.read_slice_f32("bias", 1, 0, 1); }).find("cannot slice dimension 1"), std::string::npos);
  EXPECT_NE(error_of([&] { f.read_slice_f32("w.col", 0, 10, 13); }).find("outside dimension 0"), std::string::npos);
  EXPECT_NE(error_of([&] { f.info("nope"); }).find("no tensor 'nope'"), std::string::npos);
  // A non-finite weight is refused, naming the tensor, in a whole read and in the slice that holds it.
  const std::string bad = (dir / "nan.safetensors").string();
  std::vector<float> v = iota_values(24, 0.5f);
  v[13] = std::numeric_limits<float>::quiet_NaN();
  write_safetensors(bad, {{"w", {4, 6}, v, DType::BF16}, {"s", {}, {INFINITY}, DType::F32}}, {});
  const SafetensorsFile g(bad);
  EXPECT_NE(error_of([&] { g.read_f32("w"); }).find("tensor 'w': holds a non-finite value (nan) at element 13"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.read_slice_f32("w", 0, 2, 3); }).find("non-finite"), std::string::npos);
  EXPECT_EQ(g.read_slice_f32("w", 0, 0, 2).size(), 12u);  // the rows without it read
  EXPECT_NE(error_of([&] { g.read_f32("s"); }).find("tensor 's': holds a non-finite value (inf)"), std::string::npos);
  fs::remove_all(dir);
}

// ---- safetensors: malformed headers ------------------------------------------------------

// Writes u64 len | header | data; `len` overrides the true header length when >= 0.
std::string write_raw(const fs::path& dir, const std::string& name, const std::string& header,
                      size_t data_bytes, int64_t len = -1) {
  const std::string path = (dir / name).string();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t n = len >= 0 ? uint64_t(len) : header.size();
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(b), 8);
  f << header;
  std::string data(data_bytes, '\0');
  f << data;
  return path;
}

TEST(Safetensors, RefusesMalformedHeaders) {
  fs::path dir = test::scratch_dir("st_bad");
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  EXPECT_NO_THROW(SafetensorsFile(write_raw(dir, "ok.st", ok, 16)));

  struct Case { std::string name, header; size_t data; int64_t len; std::string what; };
  const std::vector<Case> cases = {
      {"short.st", "", 0, -2, "too short"},
      {"huge_len.st", ok, 16, int64_t(200) << 20, "exceeds the limit"},
      {"past_end.st", ok, 16, 4096, "runs past the end of the file"},
      {"not_json.st", "{\"t\":", 16, -1, "JSON error"},
      {"not_object.st", "[1,2]", 16, -1, "expected an object"},
      {"past_data.st", R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})", 16, -1,
       "run past the end of the data area"},
      {"overlap.st",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       16, -1, "overlapping"},
      {"dtype.st", R"({"t":{"dtype":"Q4","shape":[2,2],"data_offsets":[0,16]}})", 16, -1, "unknown dtype 'Q4'"},
      {"size.st", R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", 32, -1,
       "16 bytes in data_offsets but dtype F32 x shape has 24"},
      {"dtype_size.st", R"({"t":{"dtype":"F64","shape":[2,2],"data_offsets":[0,16]}})", 32, -1,
       "has 32 bytes"},
      {"reversed.st", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 16, -1, "increasing pair"},
      {"neg_dim.st", R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 16, -1, "negative dimension"},
      {"extra_key.st", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 16, -1,
       "unexpected key 'x'"},
      {"offsets.st", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 16, -1, "2 entries"},
      {"meta.st", R"({"__metadata__":{"a":1}})", 0, -1, "__metadata__ 'a'"},
      {"overflow.st", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16, -1,
       "shape too large"},
      // The format forbids bytes that belong to no tensor, and a header not starting with '{'.
      {"hole.st",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12, -1, "4 bytes of the data area before tensor 'b' (from byte 4) belong to no tensor"},
      {"trailing.st", ok, 24, -1, "the last 8 bytes of the data area (from byte 16) belong to no tensor"},
      {"leading.st", " " + ok, 16, -1, "must start with '{'"},
      {"offset_float.st", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", 4, -1, "data_offsets[1]=4"},
  };
  for (const auto& c : cases) {
    std::string path = c.len == -2 ? (dir / c.name).string() : write_raw(dir, c.name, c.header, c.data, c.len);
    if (c.len == -2) std::ofstream(path, std::ios::binary) << "abc";
    std::string msg = error_of([&] { SafetensorsFile f(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.name << ": " << msg;
  }
  // An integer tensor opens (it is valid) but is refused as f32.
  SafetensorsFile ints(write_raw(dir, "ints.st", R"({"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16));
  std::string msg = error_of([&] { ints.read_f32("i"); });
  EXPECT_NE(msg.find("tensor 'i'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a float type"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { SafetensorsFile f((dir / "missing.st").string()); }).find("cannot open"),
            std::string::npos);
  fs::remove_all(dir);
}

// ---- sharded checkpoints ------------------------------------------------------------------

TEST(Safetensors, ShardedIndex) {
  fs::path dir = test::scratch_dir("st_shard");
  write_safetensors((dir / "a.safetensors").string(), {{"x", {2, 2}, {1, 2, 3, 4}, DType::F32}});
  write_safetensors((dir / "b.safetensors").string(), {{"y", {3}, {5, 6, 7}, DType::BF16}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata":{"total_size":22},"weight_map":{"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"}})";
  SafetensorsCheckpoint ck(dir.string());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(ck.read_f32("x"), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ck.read_slice_f32("y", 0, 1, 3), (std::vector<float>{6, 7}));
  EXPECT_NE(error_of([&] { ck.read_f32("z"); }).find("listed in the index but not in the file"), std::string::npos);
  EXPECT_NE(error_of([&] { ck.read_f32("w"); }).find("no tensor 'w'"), std::string::npos);

  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map":{"x":"../a.safetensors"}})";
  EXPECT_NE(error_of([&] { SafetensorsCheckpoint c2(dir.string()); }).find("plain file name"), std::string::npos);
  EXPECT_NE(error_of([&] { SafetensorsCheckpoint c3((dir / "none").string()); }).find("neither model.safetensors"),
            std::string::npos);
  fs::remove_all(dir);
}

// ---- files written by transformers ----------------------------------------------------------

TEST(Safetensors, ReadsTransformersFixtures) {
  const fs::path root = fs::path(VLM_SOURCE_DIR) / "tests" / "data" / "hf_tiny";
  SafetensorsCheckpoint llama((root / "llama").string());
  EXPECT_EQ(llama.info("model.layers.0.self_attn.k_proj.weight").shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(llama.info("lm_head.weight").dtype, StDType::F32);
  SafetensorsCheckpoint qwen((root / "qwen2").string());  // sharded, bf16
  EXPECT_EQ(qwen.info("model.layers.1.self_attn.q_proj.bias").dtype, StDType::BF16);
  EXPECT_EQ(qwen.read_f32("model.norm.weight").size(), 64u);
  SafetensorsFile ref((root / "llama" / "reference.safetensors").string());
  EXPECT_FALSE(ref.metadata().at("ids").empty());
  EXPECT_EQ(ref.info("logits").shape[1], 256);
}

}  // namespace
}  // namespace vlm

// The sharded checkpoint's shard header and index (checkpoint/shard_format.h), from bytes:
//  - round trips: headers written by shard_header_json read back equal, whole shard files
//    too (parse_shard), and the index built from them (build_index) reads back equal;
//  - every refusal is one line naming the file and what is wrong: each case edits the
//    text of a valid header or index in one place (a wrong format or version, an unknown
//    or missing key, a bad save id, a file name leaving the folder, a duplicate, a shape
//    beyond 2^50 elements, a region outside its tensor, an empty piece, pieces that do
//    not add up to their tensor, pieces sharing bytes or running past their shard, a
//    truncated text, a damaged trailer, pieces that do not lie back to back; in the
//    index, a changed byte the structure allows, such as the step, which its checksum
//    catches); an index of version 1 (no checksum) reads back too.
#include <gtest/gtest.h>

#include "base/error.h"
#include "checkpoint/shard_format.h"
#include "tests/checkpoint/index_edit.h"
#include "tests/support/errors.h"

namespace vlm {
namespace {

ShardHeader header(int rank) {
  ShardHeader h;
  h.save = "00ff12", h.step = 7, h.rank = rank, h.world = 2;
  // a [4, 6] split by rows: rank r holds rows 2r, 2r+1, in two pieces; b [5] on rank 0.
  h.pieces.push_back({"model/llm/a", {4, 6}, {{2 * rank, 0}, {2, 6}, 0, 5}, 0, 11u + uint32_t(rank)});
  h.pieces.push_back({"model/llm/a", {4, 6}, {{2 * rank, 0}, {2, 6}, 5, 12}, 20, 4000000000u});
  if (rank == 0) h.pieces.push_back({"model/llm/b", {5}, {{0}, {5}, 0, 5}, 48, 3});
  return h;
}

CheckpointIndex sample_index() {
  CheckpointState s;
  s.step = 7, s.saved_tp = 2, s.zero = 1, s.global_batch = 16, s.micro_batches = 2, s.seed = uint64_t(-3);
  s.sampler = {uint64_t(1) << 63, 2, 5};
  return build_index("00ff12", s, {"config.00ff12.ini", 10, 1}, {"options.00ff12.ini", 0, 0},
                     {"tokenizer.00ff12.json", 99, 77}, {shard_header_json(header(0)), shard_header_json(header(1))});
}

using test::error_of;

// `text` with its first `from` replaced by `to` (which must be there).
std::string edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(ShardFormat, HeadersAndIndexReadBackEqual) {
  const ShardHeader h = header(0);
  const std::string text = shard_header_json(h);
  const ShardHeader r = parse_shard_header(text, "s", h.data_bytes());
  EXPECT_EQ(r.save, h.save);
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.world, 2);
  ASSERT_EQ(r.pieces.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.pieces[i].tensor, h.pieces[i].tensor);
    EXPECT_EQ(r.pieces[i].shape, h.pieces[i].shape);
    EXPECT_EQ(r.pieces[i].region, h.pieces[i].region);
    EXPECT_EQ(r.pieces[i].at, h.pieces[i].at);
    EXPECT_EQ(r.pieces[i].crc32c, h.pieces[i].crc32c);
  }
  // A whole shard file: data, header, length, magic.
  std::string file(size_t(h.data_bytes()), 'x');
  file += text;
  for (int i = 0; i < 8; ++i) file += char(uint64_t(text.size()) >> (8 * i));
  file += "VLMSHARD";
  EXPECT_EQ(parse_shard(file, "f").pieces.size(), 3u);

  const CheckpointIndex idx = sample_index();
  const CheckpointIndex back = parse_index(index_json(idx), "i");
  EXPECT_EQ(index_json(back), index_json(idx));
  // Version 1 (before the checksum) reads the same.
  const std::string text2 = index_json(idx), body = text2.substr(text2.find(',') + 1);
  EXPECT_EQ(index_json(parse_index(edit("{" + body, "\"version\":2", "\"version\":1"), "i")), text2);
  EXPECT_EQ(back.state.seed, uint64_t(-3));
  EXPECT_EQ(back.state.sampler.seed, uint64_t(1) << 63);
  EXPECT_EQ(back.state.micro_batches, 2);
  ASSERT_EQ(back.shards.size(), 2u);
  EXPECT_EQ(back.shards[1].file, "rank_1.00ff12.shard");
  EXPECT_EQ(back.shards[0].bytes, 68 + int64_t(shard_header_json(header(0)).size()) + 16);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].name, "model/llm/a");
  EXPECT_EQ(back.tensors[0].pieces.size(), 4u);
  EXPECT_EQ(back.tensors[0].pieces[2].shard, 1);
  EXPECT_EQ(back.tensors[1].pieces[0].at, 48);
  EXPECT_EQ(back.tokenizer.file, "tokenizer.00ff12.json");
}

TEST(ShardFormat, BadIndexesAreOneLineNamingTheFile) {
  // Edits the checks below aim at, re-signed so that the checksum passes them on.
  const std::string good = index_json(sample_index());
  const auto edit = [](const std::string& text, const std::string& from, const std::string& to) {
    return test::resigned_index(vlm::edit(text, from, to));
  };
  const auto unsigned_edit = [](const std::string& text, const std::string& from, const std::string& to) {
    return vlm::edit(text, from, to);
  };
  const std::string a = "{\"name\":\"model/llm/a\",\"shape\":[4,6]";
  const std::string crc = good.substr(10, good.find(',') - 10);  // after {"crc32c":
  const struct {
    std::string text, what;
  } cases[] = {
      {good.substr(0, good.size() - 1), "JSON error"},
      {"[]", "expected a JSON object"},
      {edit(good, "vlm-checkpoint-index", "vlm-checkpoint-shard"), "not a vlm checkpoint file"},
      {edit(good, "\"version\":2", "\"version\":3"), "version 3 (this vlm reads versions 1 to 2)"},
      {edit(good, "\"version\":2", "\"version\":2,\"extra\":0"), "unexpected key 'extra'"},
      {edit(good, "\"version\":2", "\"version\":1"), "version 1 with a checksum (crc32c)"},
      {"{" + good.substr(good.find(',') + 1), "version 2 without its checksum (crc32c)"},
      // Edits the structure allows: only the checksum sees them.
      {unsigned_edit(good, "\"step\":7", "\"step\":6"), "its bytes do not match its checksum (crc32c)"},
      {unsigned_edit(good, "\"sampler_step\":5", "\"sampler_step\":4"), "its bytes do not match its checksum"},
      {unsigned_edit(good, "\"seed\":-3", "\"seed\":-2"), "its bytes do not match its checksum"},
      {unsigned_edit(good, "{\"crc32c\":" + crc, "{\"crc32c\":" + std::to_string(std::stoull(crc) ^ 1)),
       "its bytes do not match its checksum"},
      {edit(good, "\"zero\":1,", ""), "missing key 'zero'"},
      {edit(good, "\"zero\":1", "\"zero\":7"), "zero=7: expected an integer in [0, 3]"},
      {edit(good, "\"save\":\"00ff12\"", "\"save\":\"../x\""), "is not a hexadecimal id"},
      {edit(good, "\"step\":7", "\"step\":-1"), "step=-1"},
      {edit(good, "\"rank_1.00ff12.shard\"", "\"../rank_1.shard\""), "is not a plain file name"},
      {edit(good, "\"rank_1.00ff12.shard\"", "\".hidden\""), "is not a plain file name"},
      {edit(good, "\"rank_1.00ff12.shard\"", "\"rank_0.00ff12.shard\""), "is listed twice"},
      {edit(good, "\"config.00ff12.ini\"", "\"/etc/passwd\""), "is not a plain file name"},
      {edit(good, "\"model/llm/b\"", "\"model/llm/a\""), "tensor /model/llm/a is listed twice"},
      {edit(good, "\"model/llm/b\"", "\"/model/llm/b\""), "starts with '/'"},
      {edit(good, a, "{\"name\":\"model/llm/a\",\"shape\":[4194304,4194304,128]"), "has more than 2^50 elements"},
      {edit(good, a, "{\"name\":\"model/llm/a\",\"shape\":[4,5]"), "leaves the tensor [4,5] in dimension 1"},
      {edit(good, a, "{\"name\":\"model/llm/a\",\"shape\":[4,7]"), "its pieces hold 24 of its 28 elements"},
      {edit(good, "\"range\":[5,12]", "\"range\":[5,13]"), "not a range of the box's 12"},
      {edit(good, "\"range\":[5,12]", "\"range\":[5,5]"), "the piece holds no element"},
      {edit(good, "\"range\":[5,12]", "\"range\":[4,12]"), "hold more than its 24 elements"},
      {edit(good, "\"shard\":1", "\"shard\":2"), "shard=2: expected an integer in [0, 1]"},
      // The state against itself: a shard per rank of the saving run, a data position that
      // its steps reached.
      {edit(good, "\"saved_tp\":2", "\"saved_tp\":3"), "2 shards for the 3 ranks of saved_tp 3 x saved_dp 1"},
      {edit(good, "\"saved_tp\":2", "\"saved_tp\":1"), "2 shards for the 1 ranks"},
      {edit(good, "\"rank\":1", "\"rank\":0"), "rank 0 has another shard already"},
      {edit(good, "\"sampler_epoch\":2", "\"sampler_epoch\":4611686018427387904"),
       "sampler_epoch 4611686018427387904 is past the 2 x 7 batches"},
      {edit(good, "\"at\":20", "\"at\":16"), "two pieces share the bytes at 16"},
      {edit(good, "\"at\":48", "\"at\":4800"), "runs past the data area"},
      {edit(good, "\"crc32c\":4000000000", "\"crc32c\":5000000000"), "crc32c=5000000000"},
      {edit(good, "\"crc32c\":4000000000", "\"crc32c\":1.5"), "crc32c=1.5"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of([&] { parse_index(c.text, "ck/index.json"); });
    EXPECT_EQ(e.rfind("ck/index.json", 0), 0u) << c.what << ": " << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.what << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(ShardFormat, BadShardHeadersAreOneLineNamingTheFile) {
  const std::string good = shard_header_json(header(0));
  const int64_t data = header(0).data_bytes();
  auto file = [&](const std::string& text, const std::string& magic, int64_t declared = -1) {
    if (declared < 0) declared = int64_t(text.size());
    std::string f(size_t(data), 'x');
    f += text;
    for (int i = 0; i < 8; ++i) f += char(uint64_t(declared) >> (8 * i));
    return f + magic;
  };
  const int64_t n = int64_t(good.size());
  const struct {
    std::string bytes, what;
  } cases[] = {
      {"VLMSHARD", "too short for a shard file"},
      {file(good, "VLMSHARX"), "no 'VLMSHARD' at its end"},
      {file(good, "VLMSHARD", n + data + 1), "does not fit the file's"},
      {file(good, "VLMSHARD", 1), "does not fit the file's"},
      {file(good, "VLMSHARD", n - 1), "JSON error"},
      {file(edit(good, "\"at\":20", "\"at\":24"), "VLMSHARD"), "starts at byte 24, expected 20"},
      {file(edit(good, "\"rank\":0", "\"rank\":2"), "VLMSHARD"), "rank=2: expected an integer in [0, 1]"},
      {file(edit(good, "vlm-checkpoint-shard", "vlm-checkpoint-index"), "VLMSHARD"), "not a vlm checkpoint file"},
      {file(edit(good, "\"tensor\":\"model/llm/b\"", "\"tensor\":\"\""), "VLMSHARD"), "tensor must have 1 to"},
      {file(edit(good, "\"shape\":[5]", "\"shape\":[5,1,1,1,1,1,1,1,1]"), "VLMSHARD"), "at most 8"},
  };
  for (const auto& c : cases) {
    const std::string e = error_of([&] { parse_shard(c.bytes, "ck/rank_0.shard"); });
    EXPECT_EQ(e.rfind("ck/rank_0.shard", 0), 0u) << c.what << ": " << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.what << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // Pieces that hold fewer bytes than the data area.
  EXPECT_NE(error_of([&] { parse_shard_header(good, "s", data + 4); }).find("its pieces hold 68 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace vlm

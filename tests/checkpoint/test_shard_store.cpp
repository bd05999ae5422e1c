// The sharded reader (checkpoint/shard_store.h) on a folder this test writes itself: three
// tensors (a [6, 10] in two row slices each cut in two ranges, b [7] whole, c [4, 3, 5] in
// three slices of its middle dimension) over four shards, element i of tensor t holding
// 1000 t + i:
//  - any region of any tensor reads back its values, and the bytes read are exactly those
//    of the pieces that hold some of its elements (found element by element);
//  - a corrupt piece is refused, naming its shard and tensor, by the reads that need it
//    only; a truncated or missing shard, a header that is not the index's, a
//    non-finite value, a run text that is not the index's, and pieces that overlap, are
//    refused in one line naming the file (and the tensor).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "base/error.h"
#include "checkpoint/shard_store.h"
#include "io/crc32c.h"
#include "tests/checkpoint/index_edit.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

namespace fs = std::filesystem;

struct Piece {
  int rank, tensor;
  TensorRegion region;
};
const char* kNames[] = {"model/llm/a", "model/llm/b", "optim/m/llm/c"};
const Dims kShapes[] = {{6, 10}, {7}, {4, 3, 5}};

std::vector<int64_t> elements(const Dims& shape, const TensorRegion& r) {  // as test_tensor_region.cpp
  std::vector<int64_t> v;
  for (int64_t e = r.begin; e < r.end; ++e) {
    int64_t rest = e, at = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      at += (r.offset[d] + rest % r.extent[d]) * stride;
      rest /= r.extent[d], stride *= shape[d];
    }
    v.push_back(at);
  }
  return v;
}

std::vector<Piece> layout() {
  return {{0, 0, {{0, 0}, {3, 10}, 0, 17}},       {2, 0, {{0, 0}, {3, 10}, 17, 30}},
          {1, 0, {{3, 0}, {3, 10}, 0, 15}},       {3, 0, {{3, 0}, {3, 10}, 15, 30}},
          {0, 1, {{0}, {7}, 0, 7}},               {0, 2, {{0, 0, 0}, {4, 1, 5}, 0, 20}},
          {1, 2, {{0, 1, 0}, {4, 1, 5}, 0, 9}},   {3, 2, {{0, 1, 0}, {4, 1, 5}, 9, 20}},
          {2, 2, {{0, 2, 0}, {4, 1, 5}, 0, 20}}};
}

// Writes the folder: each rank's shard (data, header, trailer), the texts, the index.
void write_checkpoint(const std::string& dir, float poison = 0) {
  fs::create_directories(dir);
  const std::string save = "abc123";
  std::vector<std::string> headers;
  for (int r = 0; r < 4; ++r) {
    ShardHeader h{save, 5, r, 4, {}};
    std::string data;
    for (const Piece& p : layout()) {
      if (p.rank != r) continue;
      std::vector<float> v;
      for (int64_t e : elements(kShapes[p.tensor], p.region)) v.push_back(float(1000 * p.tensor + e));
      if (poison != 0 && r == 1) v[0] = poison;
      h.pieces.push_back({kNames[p.tensor], kShapes[p.tensor], p.region, int64_t(data.size()),
                          crc32c(v.data(), v.size() * 4)});
      data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    }
    const std::string json = shard_header_json(h);
    data += json;
    for (int i = 0; i < 8; ++i) data += char(uint64_t(json.size()) >> (8 * i));
    test::write_file(dir + "/" + shard_file_name(r, save), data + "VLMSHARD");
    headers.push_back(json);
  }
  auto text = [&](const std::string& name, const std::string& t) {
    test::write_file(dir + "/" + name, t);
    return TextFile{name, int64_t(t.size()), crc32c(t.data(), t.size())};
  };
  CheckpointState s;
  s.step = 5, s.global_batch = 8, s.saved_tp = 2, s.saved_dp = 2;  // the 4 ranks above
  const CheckpointIndex idx = build_index(save, s, text("config.abc123.ini", "[train]\nsteps = 5\n"),
                                          text("options.abc123.ini", "[train]\n"), text("tokenizer.abc123.json", "{}"),
                                          headers);
  test::write_file(dir + "/" + kIndexName, index_json(idx));
}

using test::error_of;

class ShardStoreTest : public test::TempDirTest {
 protected:
  std::string folder() const { return (dir_ / "step_5").string(); }
  std::string shard(int r) const { return folder() + "/" + shard_file_name(r, "abc123"); }
};

TEST_F(ShardStoreTest, ReadsAnyRegionFromExactlyThePiecesThatHoldIt) {
  write_checkpoint(folder());
  ShardStore st(folder());
  EXPECT_EQ(st.meta().state.step, 5);
  EXPECT_EQ(st.meta().config, "[train]\nsteps = 5\n");
  EXPECT_EQ(st.members("model/llm"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(st.members("optim/m/llm"), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(st.members("model/vision").empty());
  EXPECT_EQ(st.data_bytes(), 4 * (60 + 7 + 60));
  std::mt19937_64 rng(7);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 600; ++i) {
    const int t = int(uniform(0, 2));
    const Dims& s = kShapes[t];
    TensorRegion need;
    for (int64_t d : s) {
      const int64_t o = uniform(0, d - 1);
      need.offset.push_back(o), need.extent.push_back(uniform(1, d - o));
    }
    need.begin = uniform(0, dims_numel(need.extent) - 1), need.end = uniform(need.begin + 1, dims_numel(need.extent));
    const std::vector<int64_t> want = elements(s, need);
    std::vector<float> got(want.size(), NAN);
    const uint64_t before = st.bytes_read();
    st.read(kNames[t], s, need, got.data());
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], float(1000 * t + want[k])) << region_str(need);
    const std::set<int64_t> mine(want.begin(), want.end());
    uint64_t bytes = 0;  // of the pieces holding one of its elements
    for (const Piece& p : layout()) {
      if (p.tensor != t) continue;
      bool meets = false;
      for (int64_t e : elements(s, p.region)) meets = meets || mine.count(e);
      if (meets) bytes += uint64_t(4 * p.region.numel());
    }
    EXPECT_EQ(st.bytes_read() - before, bytes) << kNames[t] << " " << region_str(need);
  }
  EXPECT_NE(error_of([&] { st.read("model/llm/z", {7}, whole_region({7}), nullptr); })
                .find("index.json: tensor /model/llm/z is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { st.read("model/llm/b", {8}, whole_region({8}), nullptr); })
                .find("tensor /model/llm/b has shape [7], the model expects [8]"),
            std::string::npos);
}

TEST_F(ShardStoreTest, DamageIsRefusedByTheReadsThatNeedIt) {
  write_checkpoint(folder());
  std::string b = test::read_file(shard(1));
  b[8] = char(b[8] ^ 1);  // inside rank 1's first piece: a's rows 3..5, elements 0..14
  test::write_file(shard(1), b);
  {
    ShardStore st(folder());
    std::vector<float> v(60);
    const TensorRegion top{{0, 0}, {3, 10}, 0, 30}, bottom{{3, 0}, {3, 10}, 0, 30};
    st.read("model/llm/a", {6, 10}, top, v.data());  // rows 0..2: another shard's pieces
    const std::string e = error_of([&] { st.read("model/llm/a", {6, 10}, bottom, v.data()); });
    EXPECT_NE(e.find(shard(1) + ": tensor /model/llm/a is corrupt (the checksum of its piece at byte 0"),
              std::string::npos)
        << e;
  }
  const TensorRegion all = whole_region({6, 10});
  std::vector<float> v(60);
  auto refused = [&](const std::string& what) {
    const std::string e = error_of([&] { ShardStore(folder()).read("model/llm/a", {6, 10}, all, v.data()); });
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  write_checkpoint(folder());
  b = test::read_file(shard(1));
  test::write_file(shard(1), b.substr(0, b.size() - 1));
  refused(shard(1) + ": holds " + std::to_string(b.size() - 1) + " bytes, the index says " + std::to_string(b.size()));
  fs::remove(shard(1));
  refused(shard(1) + ": cannot open");
  write_checkpoint(folder());
  b = test::read_file(shard(1));
  const size_t at = b.find("\"step\":5");
  test::write_file(shard(1), b.replace(at, 8, "\"step\":6"));
  refused(shard(1) + ": its header does not match the index's checksum");
  write_checkpoint(folder(), INFINITY);
  refused(shard(1) + ": tensor /model/llm/a holds a non-finite value");

  write_checkpoint(folder());
  std::string idx = test::read_file(folder() + "/" + kIndexName);
  const std::string from = "\"offset\":[3,0]";  // rank 1's slice moved onto rank 0's: overlap and hole
  test::write_file(folder() + "/" + kIndexName,
                   test::resigned_index(idx.replace(idx.find(from), from.size(), "\"offset\":[0,0]")));
  refused(folder() + "/index.json: tensor /model/llm/a: two of its pieces hold the same elements");

  write_checkpoint(folder());
  test::write_file(folder() + "/options.abc123.ini", "[train]\nsteps = 6\n");
  const std::string e = error_of([&] { ShardStore st(folder()); });
  EXPECT_NE(e.find(folder() + "/options.abc123.ini: holds 18 bytes that do not match the index's"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace vlm

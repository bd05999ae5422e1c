// tools/check_checkpoint.py, the independent reader of the format docs/checkpoints.md
// describes (the standard library alone for a sharded save), on the saves of the
// fixture's reference run at (tp, dp) = (2, 2) with ZeRO-1: it accepts both saves (every
// shard, piece checksum and element count, and the index's own checksum), and it and
// `vlm checkpoint verify` both refuse a copy whose index says another step.
#include <cstdlib>

#include "tests/checkpoint/checkpoint_fixture.h"

namespace vlm::test {
namespace {

TEST_F(Checkpoint, TheIndependentReaderAcceptsTheSavesAndRefusesAChangedIndex) {
  if (std::system("python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3 on this machine";
  reference();
  const std::string tool = "python3 " + std::string(VLM_SOURCE_DIR) + "/tools/check_checkpoint.py ";
  for (int step : {3, 6}) {
    const CommandResult r = run_command(tool + ckpt("ref", step), dir_);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_TRUE(r.out.ends_with("\nok\n")) << r.out;
  }
  const std::string changed = dir_ + "/changed_step";
  fs::remove_all(changed);
  fs::copy(ckpt("ref", 3), changed);
  std::string text = read_file(changed + "/" + kIndexName);
  const size_t at = text.find("\"step\":3,");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
  text[at + 7] = '4';
  write_file(changed + "/" + kIndexName, text);
  const CommandResult r = run_command(tool + changed, dir_);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("index.json: its bytes do not match its checksum"), std::string::npos) << r.out;
  const CommandResult v = run_command(vlm() + " checkpoint verify --checkpoint " + changed, dir_);
  expect_one_error_line(v, "vlm checkpoint verify", "its bytes do not match its checksum");
}

}  // namespace
}  // namespace vlm::test

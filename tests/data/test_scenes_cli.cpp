// `vlm data build --data.from scenes` as a user runs it (the real binary): a small build
// prints its progress lines and a file that `vlm data inspect` reads with its boxes and
// prompts; bad options (no scene, a scene size outside 96..2048, a stamp fraction
// outside 0..1, missing input folders) exit with status 2 and one error line naming the
// option or folder, and leave an existing output file untouched; the same for
// --data.from colours.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/cli.h"
#include "test_util.h"

namespace vlm::test {
namespace {

class ScenesCli : public TempDirTest {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist() || !have_tuxpaint())
      GTEST_SKIP() << "dataset-fashion-mnist or tuxpaint-stamps-default not installed";
    TempDirTest::SetUp();
  }
  CommandResult vlm(const std::string& args) { return run_command(test::vlm() + " " + args, dir_); }
};

TEST_F(ScenesCli, BuildPrintsProgressAndInspectShowsBoxes) {
  const CommandResult b = vlm("data build --data.from scenes --data.limit 30 --data.scene_size 128 --data.out s.h5");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("[build] scenes: 3/30 (10%)"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("[build] scenes: 30/30 (100%)"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("wrote s.h5: 30 images"), std::string::npos) << b.out;
  const CommandResult i = vlm("data inspect s.h5 --data.samples 3");
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("format vlm-image-text v2"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("caption boxes: present, caption labels: present"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("image sizes (HxW: count), 1 distinct: 128x128:30"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("\" -> \""), std::string::npos) << i.out;  // prompt -> answer
  EXPECT_NE(i.out.find(" box ["), std::string::npos) << i.out;
}

TEST_F(ScenesCli, BadOptionsExit2WithOneLine) {
  write("out.h5", "previous output");
  const std::string base = "data build --data.from scenes --data.out out.h5 ";
  struct Case {
    std::string args, what;
  };
  for (const Case& c : {Case{"--data.limit 0", "--data.limit"}, Case{"--data.scene_size 50", "--data.scene_size"},
                        Case{"--data.scene_size 4096", "--data.scene_size"},
                        Case{"--data.stamp_fraction 1.5", "--data.stamp_fraction"},
                        Case{"--data.stamp_fraction -0.1", "--data.stamp_fraction"},
                        Case{"--data.limit 5 --data.stamps nowhere", "nowhere: not a directory"},
                        Case{"--data.limit 5 --data.input nowhere", "nowhere: missing train-images-idx3-ubyte"},
                        Case{"--data.limit 5 --data.val_fraction 0.6 --data.test_fraction 0.5",
                             "val_fraction + test_fraction"}}) {
    SCOPED_TRACE(c.args);
    expect_one_error_line(vlm(base + c.args), "vlm data build", c.what);
    EXPECT_EQ(read_file((dir_ / "out.h5").string()), "previous output");
  }
}

// `vlm data build --data.from colours`: the default 64-pixel scenes of digits, read back by
// inspect; a size that is not a multiple of the grid or too many items exit 2 naming the
// option, and leave an existing output untouched.
TEST_F(ScenesCli, ColoursBuildAndBadOptions) {
  const CommandResult b = vlm("data build --data.from colours --data.limit 20 --data.out c.h5");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("wrote c.h5: 20 images"), std::string::npos) << b.out;
  const CommandResult i = vlm("data inspect c.h5 --data.samples 3");
  ASSERT_EQ(i.status, 0) << i.err;
  EXPECT_NE(i.out.find("image sizes (HxW: count), 1 distinct: 64x64:20"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("?\" -> \"a"), std::string::npos) << i.out;  // "... item?" -> "a seven"
  write("out.h5", "previous output");
  for (const auto& [args, what] : {std::pair<std::string, std::string>{"--data.scene_size 66", "--data.scene_size: 66"},
                                   {"--data.colour_items 6 --data.colour_grid 2", "--data.colour_items: 6"},
                                   {"--data.colour_classes shapes", "data.colour_classes"}}) {
    SCOPED_TRACE(args);
    expect_one_error_line(vlm("data build --data.from colours --data.limit 5 --data.out out.h5 " + args), "vlm data build",
                          what);
    EXPECT_EQ(read_file((dir_ / "out.h5").string()), "previous output");
  }
}

}  // namespace
}  // namespace vlm::test

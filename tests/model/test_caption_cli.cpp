// `vlm caption` as a user runs it, on a checkpoint of `vlm train` (configs/tiny.cfg, 60
// steps on a real Fashion-MNIST subset) and a test image of the subset written as PNG:
//  - alone (TP=1) and under mpirun at TP=2 it prints the same caption, the same number of
//    visual tokens (within the lod range) and the same balancer weights (three, summing
//    to 1), and writes the same relevance picture (a 256x256 PNG that decodes);
//  - sampling: a seed gives the same caption twice; --top-k 1 gives the greedy caption;
//  - a corrupt checkpoint, an output in a missing folder and a prompt longer than the
//    model's text are refused with one line and status 2 (missing or undecodable images and a missing checkpoint: the
//    vlm_add_cli_test cases of tests/train/CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data/image/image_pipeline.h"
#include "data/image/png.h"
#include "data/storage/dataset.h"
#include "data/text/tokenizer.h"
#include "tests/support/cli.h"
#include "tests/support/files.h"

namespace vlm {
namespace {

using test::vlm;
using test::mpirun;
using Result = test::CommandResult;

// The value after "<key>: " on its line of `out` ("" when absent).
std::string field(const std::string& out, const std::string& key) {
  const size_t at = out.find("\n" + key + ": ");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 3, nl = out.find('\n', from);
  return out.substr(from, nl - from);
}

class CaptionCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("caption_cli");
    const test::FashionSubset f = test::fashion_subset(vlm(), dir_);
    tokenizer_ = f.tokenizer;
    // The tiny model with room for whole captions; the vocabulary is the tokenizer's.
    const Result r = test::run_command(
        vlm() + " train --config " + std::string(VLM_SOURCE_DIR) + "/configs/tiny.cfg --data.path " + f.data +
            " --data.tokenizer " + f.tokenizer + " --model.vocab_size 300 --train.max_text 40 --train.steps 60" +
            " --train.save_every 60 --train.out_dir " + dir_ + "/runs --train.ckpt_dir " + dir_ + "/ckpt",
        dir_);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    // The first test image of the subset as a PNG file (Fashion-MNIST is stored raw).
    DatasetReader d(f.data);
    const int64_t img = d.split("test").front();
    const ImageInfo info = d.image_info(img);
    const RgbImage rgb = raw_to_rgb(d.image_data(img).data(), info.height, info.width, info.channels);
    std::vector<uint8_t> packed;
    for (int y = 0; y < rgb.height; ++y) {
      const uint8_t* row = rgb.view().row(y);
      packed.insert(packed.end(), row, row + 3 * rgb.width);
    }
    image_ = dir_ + "/test_image.png";
    test::write_file(image_, encode_png(packed.data(), rgb.height, rgb.width, 3));
  }
  static std::string caption(const std::string& extra) {
    return vlm() + " caption --checkpoint " + dir_ + "/ckpt --image " + image_ + " " + extra;
  }
  static inline std::string dir_, image_, tokenizer_;
};

TEST_F(CaptionCli, TpOneAndTwoGiveTheSameCaptionAndPicture) {
  const Result a = test::run_command(caption("--save-relevance " + dir_ + "/rel1.png"), dir_);
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  const Result b = test::run_command(mpirun(2) + caption("--tp 2 --save-relevance " + dir_ + "/rel2.png"), dir_);
  ASSERT_EQ(b.status, 0) << b.out << b.err;
  EXPECT_NE(field(a.out, "caption"), "") << a.out;
  EXPECT_EQ(field(a.out, "caption"), field(b.out, "caption")) << a.out << b.out;
  EXPECT_EQ(field(a.out, "visual tokens"), field(b.out, "visual tokens"));
  const int visual = std::stoi(field(a.out, "visual tokens"));
  EXPECT_GE(visual, 4);  // configs/tiny.cfg: lod 4..10
  EXPECT_LE(visual, 10);
  const std::string w = field(a.out, "balancer weights");
  double p = 0, q = 0, r = 0;
  ASSERT_EQ(std::sscanf(w.c_str(), "propositional %lf, perspectival %lf, participatory %lf", &p, &q, &r), 3) << w;
  EXPECT_NEAR(p + q + r, 1.0, 1e-3) << w;
  EXPECT_EQ(w, field(b.out, "balancer weights"));
  const std::string png1 = test::read_file(dir_ + "/rel1.png"), png2 = test::read_file(dir_ + "/rel2.png");
  EXPECT_EQ(png1, png2);
  const RgbImage pic = decode_rgb(reinterpret_cast<const uint8_t*>(png1.data()), png1.size());
  EXPECT_EQ(pic.height, 256);
  EXPECT_EQ(pic.width, 256);
}

TEST_F(CaptionCli, SamplingIsSeeded) {
  const Result greedy = test::run_command(caption(""), dir_);
  const Result top1 = test::run_command(caption("--temperature 1 --top-k 1 --seed 5"), dir_);
  const Result s1 = test::run_command(caption("--temperature 1.5 --seed 9"), dir_);
  const Result s2 = test::run_command(caption("--temperature 1.5 --seed 9"), dir_);
  for (const Result* r : {&greedy, &top1, &s1, &s2}) ASSERT_EQ(r->status, 0) << r->out << r->err;
  EXPECT_EQ(field(top1.out, "caption"), field(greedy.out, "caption"));
  EXPECT_EQ(field(s1.out, "caption"), field(s2.out, "caption"));
  EXPECT_NE(s1.out.find("sampled"), std::string::npos) << s1.out;
}

TEST_F(CaptionCli, BadInputsAreOneLine) {
  const std::string bad = dir_ + "/bad_ckpt.h5";
  test::write_file(bad, "not an HDF5 file");
  test::expect_one_error_line(test::run_command(vlm() + " caption --checkpoint " + bad + " --image " + image_, dir_),
                              "vlm caption", "bad_ckpt.h5");
  test::expect_one_error_line(test::run_command(caption("--save-relevance " + dir_ + "/no/such/dir/x.png"), dir_),
                              "vlm caption", "does not exist");
  test::expect_one_error_line(test::run_command(caption("--save-relevance " + dir_ + "/rel.jpg"), dir_), "vlm caption",
                              "--save-relevance");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/rel.jpg"));
  test::expect_one_error_line(test::run_command(caption("--top-k 2"), dir_), "vlm caption", "--top-k 2");
  // The checkpoint's train.max_text is 40: BOS, at most 37 prompt tokens, and a caption
  // token before the total reaches 40 (model/generate.h). A prompt of 37 tokens runs, one
  // of 38 is refused.
  const Tokenizer tok = Tokenizer::load(tokenizer_);
  std::string words = "a";
  while (tok.encode(words).size() < 37) {
    size_t before = tok.encode(words).size();
    for (const char* piece : {" shirt", " a", " x", "x"})  // the first that keeps to 37 tokens
      if (tok.encode(words + piece).size() <= 37) {
        words += piece;
        break;
      }
    ASSERT_GT(tok.encode(words).size(), before) << words;
  }
  ASSERT_EQ(tok.encode(words).size(), 37u);
  const Result fits = test::run_command(caption("--prompt '" + words + "'"), dir_);
  EXPECT_EQ(fits.status, 0) << fits.out << fits.err;
  ASSERT_EQ(tok.encode(words + " a").size(), 38u);
  test::expect_one_error_line(test::run_command(caption("--prompt '" + words + " a'"), dir_), "vlm caption",
                              "--prompt: 38 tokens; the checkpoint's model reads prompts of at most 37");
}

}  // namespace
}  // namespace vlm

// `vlm vision features` as a user runs it (the real binary, single process):
//  - On the siglip and llava fixtures it writes features [G*G, d] equal to transformers'
//    reference (llava: its own readout, the last block without post_layernorm, which
//    differs) and the texture array [13, G, G] of the image; the file is complete under
//    its name (no temporary left).
//  - An encoder from options (--config) and --seed: the same seed gives the same
//    features, another seed others.
//  - Malformed checkpoints (missing tensor, wrong shape, unknown model_type, vision.patch
//    disagreeing with patch_size), a missing image: exit status 2, one error line on
//    stderr (after the backend line) naming the file and the tensor or key, and no
//    output file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "data/image/texture.h"
#include "io/h5_io.h"
#include "siglip_test_util.h"
#include "tests/support/cli.h"

namespace vlm::test {
namespace {

namespace fs = std::filesystem;

// Runs `vlm <args>` with stdout and stderr captured in files of `dir`. The command starts
// MPI (a multi-rank command), so in an ASan build its leaks are not checked (Open MPI does
// not free its memory at exit; tests/lsan.supp); memory errors still are.
CommandResult run_vlm(const std::string& dir, const std::string& args) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string env = std::string("ASAN_OPTIONS='") + (asan ? asan : "") + ":detect_leaks=0' ";
  return run_command(env + vlm() + " " + args, dir);
}

std::vector<float> read_f32(const std::string& path, const std::string& name, std::vector<int64_t>* dims) {
  H5Id f = h5_open_file(path);
  H5Id ds = h5_open_dataset(f, path, name, H5Elem::F32, int(dims->size()), dims);
  int64_t n = 1;
  for (int64_t d : *dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  h5_read_rows(ds, H5Elem::F32, 0, (*dims)[0], n / (*dims)[0], v.data());
  return v;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& ref) {
  double e = 0, m = 0;
  for (size_t i = 0; i < ref.size() && i < a.size(); ++i) {
    e = std::max(e, std::fabs(double(a[i]) - ref[i]));
    m = std::max(m, std::fabs(double(ref[i])));
  }
  return a.size() == ref.size() ? e / m : 1e30;
}

std::string leftovers(const std::string& dir) {
  std::string s;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) s += e.path().filename().string() + " ";
  return s;
}

TEST(VisionCli, FeaturesOfTheFixtures) {
  const std::string dir = scratch_dir("vision_cli_ok");
  const std::string img = fixture("siglip") + "/image.png";
  for (const char* name : {"siglip", "llava"}) {
    const std::string out = dir + "/" + name + ".h5";
    const CommandResult r = run_vlm(dir, cat("vision features --device cpu --vision.hf ", fixture(name), " --image ", img,
                                      " --out ", out));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("features [16, 32]"), std::string::npos) << r.out;
    std::vector<int64_t> fd(2), td(3);
    const std::vector<float> f = read_f32(out, "features", &fd), t = read_f32(out, "texture", &td);
    EXPECT_EQ(fd, (std::vector<int64_t>{16, 32}));
    EXPECT_EQ(td, (std::vector<int64_t>{13, 4, 4}));
    const double e = max_rel(f, reference("last_hidden_state"));
    if (std::string(name) == "siglip")
      EXPECT_LE(e, 1e-4);
    else
      EXPECT_GT(e, 0.1) << "llava's readout has no post_layernorm";
    const std::vector<uint8_t> px = fixture_image(32);
    EXPECT_TRUE(t == compute_texture(ImageView::packed(px.data(), 32, 32), 4));
    H5Id file = h5_open_file(out);
    EXPECT_EQ(h5_read_attr_string(file, out, "format"), "vlm-vision-features");
    EXPECT_EQ(h5_read_attr_string(file, out, "readout"), std::string(name) == "llava" ? "blocks=2 post_norm=0"
                                                                                      : "blocks=2 post_norm=1");
  }
  EXPECT_EQ(leftovers(dir), "");
}

TEST(VisionCli, EncoderFromOptionsAndSeed) {
  const std::string dir = scratch_dir("vision_cli_seed");
  write_file(dir + "/enc.cfg", "[vision]\nimage_size = 32\npatch = 8\nd_model = 16\nlayers = 1\nheads = 2\nd_ff = 32\n");
  const std::string base = cat("vision features --device cpu --config ", dir, "/enc.cfg --image ", fixture("siglip"),
                               "/image.png --out ", dir, "/");
  std::vector<std::vector<float>> f;
  for (const char* run : {"a.h5 --seed 3", "b.h5 --seed 3", "c.h5 --seed 4"}) {
    const CommandResult r = run_vlm(dir, base + run);
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<int64_t> d(2);
    f.push_back(read_f32(dir + "/" + std::string(run).substr(0, 4), "features", &d));
    EXPECT_EQ(d, (std::vector<int64_t>{16, 16}));
  }
  EXPECT_TRUE(f[0] == f[1]);
  EXPECT_FALSE(f[0] == f[2]);
}

TEST(VisionCli, BadInputsExitTwoWithOneLine) {
  const std::string root = scratch_dir("vision_cli_bad");
  const std::string img = fixture("siglip") + "/image.png";
  struct Case {
    std::string name, args, image;
    std::vector<std::string> parts;  // in the one line
  };
  std::vector<Case> cases;
  std::string d = root + "/missing";
  copy_fixture("siglip", d);
  edit_weights(d, "encoder.layers.0.self_attn.q_proj.weight");
  cases.push_back({"missing tensor", "--vision.hf " + d, img,
                   {d + "/model.safetensors", "'encoder.layers.0.self_attn.q_proj.weight'"}});
  d = root + "/shape";
  copy_fixture("siglip_full", d);
  edit_weights(d, "", "vision_model.encoder.layers.1.mlp.fc1.weight", {64, 31});
  cases.push_back({"wrong shape", "--vision.hf " + d, img,
                   {d + "/model.safetensors", "'vision_model.encoder.layers.1.mlp.fc1.weight'", "[64,31]"}});
  d = root + "/type";
  copy_fixture("siglip", d);
  edit_config(d, "\"siglip_vision_model\"", "\"vit\"");
  cases.push_back({"unknown model_type", "--vision.hf " + d, img, {d + "/config.json", "model_type='vit'"}});
  cases.push_back({"patch disagrees", "--vision.hf " + fixture("siglip") + " --vision.patch 16", img,
                   {"vision.patch=16", fixture("siglip") + "/config.json", "patch_size=8"}});
  cases.push_back({"missing image", "--vision.hf " + fixture("siglip"), root + "/absent.png", {root + "/absent.png"}});
  // Read within the limit of one encoded image, not whole: an endless device ends at the limit.
  cases.push_back({"endless image", "--vision.hf " + fixture("siglip"), "/dev/zero", {"/dev/zero", "larger than"}});
  cases.push_back({"folder as image", "--vision.hf " + fixture("siglip"), root, {root}});
  cases.push_back({"not an image", "--vision.hf " + fixture("siglip"), fixture("siglip") + "/config.json",
                   {"--image", "config.json", "not a decodable PNG or JPEG image"}});
  // An encoder larger than the machine (2^28 patches): named by the options that size it.
  cases.push_back({"encoder too large",
                   "--vision.image_size 16384 --vision.patch 1 --vision.d_model 8 --vision.heads 1 --vision.d_ff 8 "
                   "--vision.layers 1",
                   fixture("siglip") + "/image.png",
                   {"--vision.image_size 16384 with --vision.patch 1 and --vision.d_model 8: the encoder for "
                    "268435456 patches does not fit (", "out of memory on cpu"}});
  for (const Case& c : cases) {
    const std::string out = root + "/out.h5";
    const CommandResult r = run_vlm(root, cat("vision features --device cpu ", c.args, " --image ", c.image, " --out ", out));
    EXPECT_EQ(r.status, 2) << c.name << ": " << r.err;
    // stderr: the backend line of --device, then the error in one line.
    const size_t at = r.err.find("vlm vision features: error: ");
    ASSERT_NE(at, std::string::npos) << c.name << ": " << r.err;
    const std::string line = r.err.substr(at);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("error"), at + std::string("vlm vision features: ").size()) << c.name << ": " << r.err;
    for (const std::string& p : c.parts) EXPECT_NE(line.find(p), std::string::npos) << c.name << ": " << line;
    EXPECT_FALSE(fs::exists(out)) << c.name;
    std::printf("%-18s exit %d: %s", c.name.c_str(), r.status, line.c_str());
  }
  EXPECT_EQ(leftovers(root), "");
}

}  // namespace
}  // namespace vlm::test

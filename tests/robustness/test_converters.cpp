// Malformed `vlm data build` inputs (data/convert/converters.h): bad or missing images
// beyond the policy, directories and empty files as input, image paths leaving the image
// folder, broken JSONL/LLaVA text, invalid UTF-8, Tux Paint and Fashion-MNIST folders
// that are not what they claim. Every case starts with a valid dataset at --data.out,
// which must survive the failure unchanged.
#include "robustness.h"
#include "tests/support/files.h"

namespace vlm::robustness {
namespace {

class Build : public Robust {
 protected:
  void SetUp() override {
    Robust::SetUp();
    make_dataset("out.h5");  // the existing output that no failure may touch
  }
  RunResult build(const std::string& from, const std::string& input, const std::vector<std::string>& needles,
                  std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"data", "build", "--data.from", from, "--data.input", input, "--data.out", "out.h5"};
    args.insert(args.end(), extra.begin(), extra.end());
    return refused(args, needles);
  }
  void jsonl(const std::string& rel, const std::string& text) { write(rel, text); }
};

// ---- the image policy ----

TEST_F(Build, NoUsableImage) {
  write("in/a.png", "not a png");
  write("in/b.png", png_bytes(20, 20, 1).substr(0, 30));  // cut inside the header
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n{\"image\": \"b.png\", \"caption\": \"b\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl", "none of the 2 images"});
}

TEST_F(Build, EveryImageMissing) {
  jsonl("in/caps.jsonl", "{\"image\": \"gone.png\", \"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl", "none of the 1 images"});
}

TEST_F(Build, TooManyBadImages) {
  write("in/a.png", png_bytes(20, 20, 1));
  write("in/b.png", "junk");
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n{\"image\": \"b.png\", \"caption\": \"b\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl", "1 of the 2 images", "--data.max_bad_images=0.1"});
}

TEST_F(Build, EmptyCaption) {
  write("in/a.png", png_bytes(20, 20, 1));
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n{\"image\": \"a.png\", \"caption\": \" \"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:2: the caption is empty"});
}

TEST_F(Build, ImagePathIsADirectory) {
  std::filesystem::create_directories(path("in/folder.png"));
  jsonl("in/caps.jsonl", "{\"image\": \"folder.png\", \"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"none of the 1 images"});
}

TEST_F(Build, OtherImageFormatsAreNotDecoded) {
  cv::Mat m(8, 8, CV_8UC3, cv::Scalar(1, 2, 3));
  std::vector<uchar> bmp;
  cv::imencode(".bmp", m, bmp);
  write("in/a.png", std::string(bmp.begin(), bmp.end()));
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"none of the 1 images"});
}

TEST_F(Build, PngClaimingGigapixels) {
  std::string png = png_bytes(16, 16, 2);
  for (int k = 0; k < 4; ++k) png[size_t(16 + k)] = char(k == 1 ? 0x01 : 0), png[size_t(20 + k)] = char(k == 1 ? 0x01 : 0);
  write("in/a.png", png);  // 65536 x 65536 in IHDR (CRC left wrong: never decoded)
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"none of the 1 images"});
}

// ---- inputs that are not caption files ----

TEST_F(Build, JsonlIsADirectory) {
  std::filesystem::create_directories(path("in/d"));
  build("jsonl", "in/d", {"in/d", "is a directory"});
}

TEST_F(Build, JsonlEmpty) {
  jsonl("in/e.jsonl", "");
  build("jsonl", "in/e.jsonl", {"in/e.jsonl", "no captioned images"});
}

TEST_F(Build, JsonlBlankLinesOnly) {
  jsonl("in/e.jsonl", "\n  \n\t\r\n");
  build("jsonl", "in/e.jsonl", {"in/e.jsonl", "no captioned images"});
}

TEST_F(Build, JsonlMissing) { build("jsonl", "in/none.jsonl", {"in/none.jsonl", "cannot open"}); }

TEST_F(Build, LlavaIsADirectory) {
  std::filesystem::create_directories(path("in/d"));
  build("llava", "in/d", {"in/d", "is a directory"});
}

TEST_F(Build, LlavaNotAnArray) {
  write("in/l.json", "{\"image\": \"a.png\"}");
  build("llava", "in/l.json", {"in/l.json", "JSON array"});
}

TEST_F(Build, LlavaEmptyArray) {
  write("in/l.json", "[]");
  build("llava", "in/l.json", {"in/l.json", "no captioned images"});
}

TEST_F(Build, LlavaTextOnly) {
  write("in/l.json", R"([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "ho"}]}])");
  build("llava", "in/l.json", {"in/l.json", "no captioned images"});
}

// A mistyped field of a conversation names its entry (and turn); a conversation without
// an image is text-only (skipped), one whose image is not a string is a mistake.
TEST_F(Build, LlavaMistypedFields) {
  write("in/a.png", png_bytes(20, 20, 1));
  const std::string good = R"({"image": "a.png", "conversations": [{"from": "gpt", "value": "ok"}]})";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"(5)", {"in/l.json: entry 1: expected a JSON object (a conversation), got a number"}},
      {R"({"image": 5, "conversations": []})", {"in/l.json: entry 1", "\"image\""}},
      {R"({"image": "a.png", "conversations": {"from": "gpt"}})", {"in/l.json: entry 1", "\"conversations\""}},
      {R"({"image": "a.png"})", {"in/l.json: entry 1", "\"conversations\""}},
      {R"({"image": "a.png", "conversations": ["hi"]})", {"in/l.json: entry 1: \"conversations\"[0]", "object"}},
      {R"({"image": "a.png", "conversations": [{"from": "gpt", "value": 5}]})",
       {"in/l.json: entry 1: \"conversations\"[0]", "\"value\""}},
      {R"({"image": "a.png", "conversations": [{"value": "x"}]})",
       {"in/l.json: entry 1: \"conversations\"[0]: missing string field \"from\""}},
      {R"({"image": "a.png", "conversations": [{"from": "robot", "value": "x"}]})",
       {"in/l.json: entry 1: \"conversations\"[0]: \"from\" is 'robot' (expected human, gpt or system)"}},
  };
  for (const auto& [entry, needles] : cases) {
    SCOPED_TRACE(entry);
    write("in/l.json", "[" + good + ", " + entry + "]");
    build("llava", "in/l.json", needles);
  }
}

TEST_F(Build, JsonlImagePathWithANul) {
  write("in/a.png", png_bytes(20, 20, 1));
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\\u0000x\", \"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1: the image path holds a NUL character"});
}

// ---- image paths stay inside the image folder ----

TEST_F(Build, JsonlPathEscapesWithDotDot) {
  jsonl("in/caps.jsonl", "{\"image\": \"../../../../etc/passwd\", \"caption\": \"x\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "../../../../etc/passwd", "leaves the image folder"});
}

TEST_F(Build, JsonlAbsolutePath) {
  jsonl("in/caps.jsonl", "{\"image\": \"" + path("src/im0.png") + "\", \"caption\": \"x\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "leaves the image folder"});
}

TEST_F(Build, JsonlPathEscapesAfterDescending) {
  write("in/a.png", png_bytes(20, 20, 1));
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n{\"image\": \"sub/../../src/im0.png\", \"caption\": \"b\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:2", "leaves the image folder"});
}

TEST_F(Build, LlavaPathEscapes) {
  write("in/l.json", R"([{"image": "../src/im0.png", "conversations": [{"from": "gpt", "value": "x"}]}])");
  build("llava", "in/l.json", {"in/l.json: entry 0", "leaves the image folder"});
}

TEST_F(Build, EmptyImagePath) {
  jsonl("in/caps.jsonl", "{\"image\": \"\", \"caption\": \"x\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "empty image path"});
}

// ---- text: errors name the input line ----

TEST_F(Build, JsonlSyntaxError) {
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"ok\"}\n{\"image\": oops}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:2", "JSON error"});
}

TEST_F(Build, JsonlLineNotAnObject) {
  jsonl("in/caps.jsonl", "[1, 2]\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "object"});
}

TEST_F(Build, JsonlCaptionNotAString) {
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": 42}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "caption"});
}

TEST_F(Build, JsonlCaptionsArrayWithANumber) {
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"captions\": [\"a\", 7]}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "\"captions\"[1]"});
}

TEST_F(Build, JsonlMissingImageField) {
  jsonl("in/caps.jsonl", "{\"caption\": \"a\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "\"image\""});
}

TEST_F(Build, JsonlCaptionNotUtf8) {
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"caf\xE9\"}\n");  // Latin-1 e-acute
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "UTF-8"});
}

TEST_F(Build, CaptionLongerThanTheSchemaAllows) {
  write("in/a.png", png_bytes(20, 20, 1));
  jsonl("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"" + std::string((1 << 20) + 1, 'x') + "\"}\n");
  build("jsonl", "in/caps.jsonl", {"in/caps.jsonl:1", "longer than the limit"});
}

// ---- Tux Paint and Fashion-MNIST folders ----

TEST_F(Build, TuxpaintWithoutStamps) {
  std::filesystem::create_directories(path("stamps/empty"));
  build("tuxpaint", "stamps", {"stamps", "no stamps"});
}

TEST_F(Build, TuxpaintDescriptionNotUtf8) {
  write("stamps/a.png", png_bytes(20, 20, 1));
  write("stamps/a.txt", "Caf\xE9 au lait\n");
  build("tuxpaint", "stamps", {"stamps/a.txt", "not valid UTF-8"});
}

TEST_F(Build, TuxpaintUndecodableStamps) {
  write("stamps/a.png", "no png");
  write("stamps/a.txt", "A stamp\n");
  build("tuxpaint", "stamps", {"stamps", "none of the 1 images"});
}

TEST_F(Build, TuxpaintNotADirectory) { build("tuxpaint", "nowhere", {"nowhere", "not a directory"}); }

// IDX files (big-endian dims) as the Fashion-MNIST converter reads them.
std::string idx(std::vector<uint32_t> dims, const std::string& data) {
  std::string s{0, 0, 8, char(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s += char((d >> (8 * k)) & 0xFF);
  return s + data;
}

class Fashion : public Build {
 protected:
  void write_set(const std::string& images_name, const std::string& images, const std::string& labels) {
    write("fm/" + images_name, images);
    write("fm/train-labels-idx1-ubyte", labels);
    write("fm/t10k-images-idx3-ubyte", idx({1, 28, 28}, std::string(784, '\1')));
    write("fm/t10k-labels-idx1-ubyte", idx({1}, std::string(1, '\2')));
  }
};

TEST_F(Fashion, MissingFiles) {
  std::filesystem::create_directories(path("fm"));
  build("fashion-mnist", "fm", {"fm", "train-images-idx3-ubyte"});
}

TEST_F(Fashion, HeaderPromisesMoreThanTheFileHolds) {
  write_set("train-images-idx3-ubyte", idx({60000, 28, 28}, std::string(100, '\0')), idx({60000}, ""));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte", "truncated"});
}

TEST_F(Fashion, MoreDataThanTheHeaderDeclares) {
  write_set("train-images-idx3-ubyte", idx({2, 28, 28}, std::string(3 * 784, '\3')), idx({2}, "\1\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte", "more data than the 1568 bytes"});
}

TEST_F(Fashion, BadMagic) {
  write_set("train-images-idx3-ubyte", std::string("\x00\x00\x0D\x03", 4) + std::string(100, '\0'), idx({1}, "\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte", "not an unsigned-byte IDX"});
}

TEST_F(Fashion, LabelOutOfRange) {
  write_set("train-images-idx3-ubyte", idx({2, 28, 28}, std::string(2 * 784, '\3')), idx({2}, std::string("\1\x0C", 2)));
  build("fashion-mnist", "fm", {"train-labels-idx1-ubyte", "label 1 is 12"});
}

TEST_F(Fashion, LabelCountDiffers) {
  write_set("train-images-idx3-ubyte", idx({2, 28, 28}, std::string(2 * 784, '\3')), idx({3}, "\1\1\1"));
  build("fashion-mnist", "fm", {"train-labels-idx1-ubyte", "3 labels for the 2 images"});
}

TEST_F(Fashion, ImagesNot28By28) {
  write_set("train-images-idx3-ubyte", idx({2, 14, 14}, std::string(2 * 196, '\3')), idx({2}, "\1\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte", "28 x 28"});
}

TEST_F(Fashion, GzipThatIsNotGzip) {
  write_set("train-images-idx3-ubyte.gz", "\x1f\x8b\x08\x00garbage", idx({1}, "\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte.gz"});
}

// gzip -t refuses bytes after the last member; so do we (zlib's gz* API skips them).
TEST_F(Fashion, GzipWithBytesAfterItsEnd) {
  const std::string images = test::gzip(idx({1, 28, 28}, std::string(784, '\3')));
  write_set("train-images-idx3-ubyte.gz", images + std::string(4096, 'x'), idx({1}, "\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte.gz", "bytes after the end of its gzip data"});
  write_set("train-images-idx3-ubyte.gz", images + "\n", idx({1}, "\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte.gz", "bytes after the end of its gzip data"});
}

// A gzip member cut short.
TEST_F(Fashion, GzipCutShort) {
  const std::string images = test::gzip(idx({1, 28, 28}, std::string(784, '\3')));
  write_set("train-images-idx3-ubyte.gz", images.substr(0, images.size() - 9), idx({1}, "\1"));
  build("fashion-mnist", "fm", {"train-images-idx3-ubyte.gz", "truncated or corrupt"});
}

// ---- output and tokenizer options ----

TEST_F(Build, OutputFolderMissing) {
  refused({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "nofolder/x.h5"},
          {"nofolder/x.h5", "does not exist"});
}

TEST_F(Build, OutputIsADirectory) {
  std::filesystem::create_directories(path("outdir"));
  refused({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "outdir"},
          {"outdir", "is a directory"});
}

TEST_F(Build, BadTokenizerFailsBeforeConverting) {
  write("tok.json", "{\"model\": {\"type\": \"BPE\"}}");
  build("jsonl", "src/caps.jsonl", {"tok.json", "model.vocab"}, {"--data.tokenizer", "tok.json"});
}

}  // namespace
}  // namespace vlm::robustness

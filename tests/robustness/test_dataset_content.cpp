// Datasets whose structure is valid but whose content is not (docs/errors.md, "Text that
// is not UTF-8", "Images that do not decode"): a caption or a prompt that is not UTF-8 (the schema says UTF-8), made by
// editing one byte of a valid file with the HDF5 C API, is refused by every command that
// reads it (`vlm data inspect`, `vlm data tokenizer`, `vlm data tokenize`, `vlm train`)
// in one line naming the file, the dataset and the caption; a prompt given on the command
// line (`vlm caption --prompt`, `--data.prompt`) likewise. An image whose bytes do not
// decode, or decode to another size than recorded, makes `vlm data inspect` report how
// many fail and which, with exit code 2, while `vlm data build` never writes one; a
// damaged compressed chunk of raw images is refused by inspect as by training.
#include <hdf5.h>

#include "robustness.h"

namespace vlm::robustness {
namespace {

// The bytes of the 1-D u8 dataset `name` of `file`.
std::string read_bytes(const std::string& file, const char* name) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t s = H5Dget_space(d);
  std::string bytes(size_t(H5Sget_simple_extent_npoints(s)), '\0');
  H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  H5Sclose(s), H5Dclose(d), H5Fclose(f);
  return bytes;
}

// Overwrites the whole 1-D dataset `name` of `file` (u8, or i32 when its elements are
// wider) with `bytes`, as many elements as it holds.
void write_bytes(const std::string& file, const char* name, const void* bytes) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t t = H5Dget_type(d);
  const hid_t mem = H5Tget_size(t) == 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_INT32;
  ASSERT_GE(H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes), 0) << name;
  H5Tclose(t), H5Dclose(d), H5Fclose(f);
}

// Replaces the first occurrence of `from` in the u8 dataset `name` by `to` (same length).
void replace_in(const std::string& file, const char* name, const std::string& from, const std::string& to) {
  std::string b = read_bytes(file, name);
  const size_t at = b.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << name;
  ASSERT_EQ(from.size(), to.size());
  b.replace(at, from.size(), to);
  write_bytes(file, name, b.data());
}

class Content : public Robust {
 protected:
  // ds.h5 from src/caps.jsonl: 3 PNG images, caption "picture number i", and with
  // `prompts` the prompt "which picture is this?" for every caption.
  void make(bool prompts) {
    if (!prompts) return make_dataset("ds.h5");
    std::string jsonl;
    for (int i = 0; i < 3; ++i) {
      write("src/im" + std::to_string(i) + ".png", png_bytes(24 + i, 20, i));
      jsonl += "{\"image\": \"im" + std::to_string(i) + ".png\", \"caption\": \"picture number " + std::to_string(i) +
               "\", \"prompt\": \"which picture is this?\"}\n";
    }
    write("src/caps.jsonl", jsonl);
    const RunResult r =
        run_vlm({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "ds.h5"}, dir_);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // A tokenizer of ds.h5 (made before its text is broken).
  void tokenizer() {
    const RunResult r =
        run_vlm({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300", "--data.out", "tok.json"}, dir_);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // Every command that reads the texts refuses them with `needles`.
  void every_reader_refuses(const std::vector<std::string>& needles) {
    refused({"data", "inspect", "ds.h5"}, needles);
    refused({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300", "--data.out", "tok2.json"}, needles);
    refused({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, needles);
    refused({"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", "ds.h5", "--data.tokenizer",
             "tok.json", "--train.steps", "1", "--train.save_every", "-1", "--train.out_dir", dir_ + "_runs"},
            needles);
    fs::remove_all(dir_ + "_runs");
  }
};

TEST_F(Content, CaptionNotUtf8) {
  make(false);
  tokenizer();
  replace_in(path("ds.h5"), "/captions/text", "picture number 1", "pictur\xE9 number 1");  // Latin-1 e-acute
  every_reader_refuses({"ds.h5: dataset /captions/text entry 1 (caption 1) is not valid UTF-8 at byte 6 of 16"});
}

TEST_F(Content, CaptionWithASurrogate) {
  make(false);
  tokenizer();
  replace_in(path("ds.h5"), "/captions/text", "picture number 2", "picture n\xED\xA0\x80" "er 2");  // U+D800
  every_reader_refuses({"ds.h5: dataset /captions/text entry 2 (caption 2) is not valid UTF-8 at byte 9"});
}

TEST_F(Content, PromptNotUtf8) {
  make(true);
  tokenizer();
  std::string p = read_bytes(path("ds.h5"), "/captions/prompt");
  const size_t second = p.find("which", 1);  // caption 1's prompt
  ASSERT_NE(second, std::string::npos);
  p[second + 2] = '\xC3';  // a lead byte without its continuation
  write_bytes(path("ds.h5"), "/captions/prompt", p.data());
  every_reader_refuses({"ds.h5: dataset /captions/prompt entry 1 (caption 1) is not valid UTF-8 at byte 2"});
}

TEST_F(Content, PromptOptionNotUtf8) {
  make(false);
  refused({"caption", "--checkpoint", "none.h5", "--image", "src/im0.png", "--prompt", "caf\xE9?"},
          {"--prompt is not valid UTF-8 at byte 3 of 5"});
  refused({"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", "ds.h5", "--data.prompt",
           "d\xE9\xE9tails", "--train.out_dir", dir_ + "_runs"},
          {"--data.prompt is not valid UTF-8 at byte 1 of 8"});
}

TEST_F(Content, UndecodableImages) {
  make(false);
  // Image 1's bytes replaced by as many bytes of noise, image 2's PNG cut inside its
  // pixels (the rest zeros): neither decodes; the file's structure stays valid.
  const std::string enc = read_bytes(path("ds.h5"), "/images/encoded");
  std::string b = enc;
  const size_t at1 = b.find("\x89PNG", 1), at2 = b.find("\x89PNG", at1 + 1);
  ASSERT_NE(at2, std::string::npos);
  for (size_t k = at1; k < at2; ++k) b[k] = char(k * 7 + 3);
  for (size_t k = at2 + (b.size() - at2) / 2; k < b.size(); ++k) b[k] = 0;
  write_bytes(path("ds.h5"), "/images/encoded", b.data());
  const RunResult r = refused({"data", "inspect", "ds.h5"},
                              {"ds.h5: 2 of 3 images cannot be used (images 1, 2; first: image 1 (",
                               "bytes) does not decode as a PNG or JPEG image)"});
  EXPECT_NE(r.out.find("images: 2 of 3 cannot be used (first: image 1 ("), std::string::npos) << r.out;
}

TEST_F(Content, ImageOfAnotherSizeThanRecorded) {
  make(false);
  const int32_t widths[3] = {24, 99, 26};  // image 1 is 25 wide
  write_bytes(path("ds.h5"), "/images/width", widths);
  refused({"data", "inspect", "ds.h5"},
          {"1 of 3 images cannot be used (images 1; first: image 1 decodes to 20x25, not its recorded size 20x99"});
}

// Raw pixels need no decoding, but `vlm data inspect` reads them all: a damaged
// compressed chunk of /images/raw (found with the HDF5 C API) is one line, as in training.
TEST_F(Content, CorruptChunkOfRawImages) {
  const RunResult b = run_vlm({"data", "build", "--data.from", "fashion-mnist", "--data.limit", "300", "--data.out",
                               "ds.h5"},
                              dir_);
  ASSERT_EQ(b.code, 0) << b.err;
  haddr_t at = 0;
  hsize_t size = 0;
  {
    const hid_t f = H5Fopen(path("ds.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "/images/raw", H5P_DEFAULT);
    const hid_t s = H5Dget_space(d);
    hsize_t offset[4];
    unsigned mask = 0;
    hsize_t chunks = 0;
    H5Dget_num_chunks(d, s, &chunks);
    const herr_t e = H5Dget_chunk_info(d, s, chunks - 1, offset, &mask, &at, &size);
    H5Sclose(s), H5Dclose(d), H5Fclose(f);
    ASSERT_GE(e, 0);
  }
  ASSERT_GT(size, 40u);
  std::string bytes = read_file(path("ds.h5"));
  for (size_t i = 10; i < 30; ++i) bytes[size_t(at) + i] = char(bytes[size_t(at) + i] ^ 0x5A);
  write("ds.h5", bytes);
  refused({"data", "inspect", "ds.h5"}, {"ds.h5: dataset /images/raw: reading"});
}

TEST_F(Content, BuildNeverWritesAnUndecodableImage) {
  std::string jsonl;
  for (int i = 0; i < 4; ++i) {
    write("in/p" + std::to_string(i) + ".png", i == 2 ? png_bytes(30, 20, i).substr(0, 200) : png_bytes(30, 20, i));
    jsonl += "{\"image\": \"p" + std::to_string(i) + ".png\", \"caption\": \"c" + std::to_string(i) + "\"}\n";
  }
  write("in/caps.jsonl", jsonl);
  RunResult r = run_vlm({"data", "build", "--data.from", "jsonl", "--data.input", "in/caps.jsonl", "--data.out",
                         "ds.h5", "--data.max_bad_images", "0.5"},
                        dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("p2.png: cannot decode as a PNG or JPEG image; skipped"), std::string::npos) << r.out;
  r = run_vlm({"data", "inspect", "ds.h5"}, dir_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("images: all 3 decode to their recorded size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("text: 3 captions and 0 prompts, all valid UTF-8"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vlm::robustness

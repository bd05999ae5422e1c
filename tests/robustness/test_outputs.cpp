// No command destroys or truncates an existing file when it fails (io/atomic_file.h).
// One case per command that writes files, failing where a direct write would already have
// truncated its output: a file-size limit (RLIMIT_FSIZE) makes the write itself fail
// half-way, as a full disk would. Each case first shows that the same command without
// the limit does replace the file, so the check could fail; with the limit the old file
// must stay byte for byte, with no temporary file left beside it. Outputs that would
// replace an input or a special file, and a checkpoint folder that cannot be made, are
// refused before any work.
#include "robustness.h"

namespace vlm::robustness {
namespace {

class Outputs : public Robust {
 protected:
  // Runs args once without a limit (must succeed and change `out`), restores the old
  // `out`, then runs them under `limit` bytes per file: refused, `out` unchanged.
  void keeps_on_write_failure(const std::vector<std::string>& args, const std::string& out, uint64_t limit,
                              const std::vector<std::string>& env = {}) {
    const std::string old = read_file(path(out));
    RunOptions ok;
    ok.env = env;
    const RunResult r = run_vlm(args, dir_, ok);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_NE(read_file(path(out)), old) << "the command did not write " << out;
    write(out, old);
    RunOptions lim = ok;
    lim.file_size_limit = limit;
    refused(args, {out, "write"}, lim);
    EXPECT_EQ(read_file(path(out)), old);
  }
};

TEST_F(Outputs, DataBuild) {
  make_dataset("out.h5");
  for (int i = 0; i < 4; ++i) write("in/p" + std::to_string(i) + ".png", png_bytes(200, 150, i));
  std::string jsonl;
  for (int i = 0; i < 4; ++i) jsonl += "{\"image\": \"p" + std::to_string(i) + ".png\", \"caption\": \"new\"}\n";
  write("in/caps.jsonl", jsonl);
  keeps_on_write_failure({"data", "build", "--data.from", "jsonl", "--data.input", "in/caps.jsonl", "--data.out",
                          "out.h5"},
                         "out.h5", 20000);
}

TEST_F(Outputs, DataBuildRefusingItsInputAfterStarting) {
  // The bad-image policy fails after the writer has started: the old file stays.
  make_dataset("out.h5");
  write("in/a.png", png_bytes(20, 20, 1));
  write("in/b.png", "junk");
  write("in/caps.jsonl", "{\"image\": \"a.png\", \"caption\": \"a\"}\n{\"image\": \"b.png\", \"caption\": \"b\"}\n");
  refused({"data", "build", "--data.from", "jsonl", "--data.input", "in/caps.jsonl", "--data.out", "out.h5"},
          {"in/caps.jsonl", "max_bad_images"});
}

TEST_F(Outputs, DataTokenizer) {
  make_dataset("ds.h5");
  write("tok.json", "{\"an\": \"earlier tokenizer\"}");
  keeps_on_write_failure({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300", "--data.out", "tok.json"},
                         "tok.json", 4096);
}

TEST_F(Outputs, DataTokenize) {
  make_dataset("ds.h5");
  const RunResult t = run_vlm({"data", "tokenizer", "--data.train", "ds.h5", "--data.vocab", "300", "--data.out",
                               "tok.json"},
                              dir_);
  ASSERT_EQ(t.code, 0) << t.err;
  keeps_on_write_failure({"data", "tokenize", "ds.h5", "--data.tokenizer", "tok.json"}, "ds.h5", 20000);
}

TEST_F(Outputs, LmLogits) {
  write("out.h5", "logits of an earlier run");
  std::string ids;
  for (int i = 0; i < 128; ++i) {
    if (i) ids += ",";
    ids += std::to_string(i % 200);
  }
  // MPI (singleton) keeps its own files small this way, so only the output hits the limit.
  keeps_on_write_failure({"lm", "logits", "--hf", hf_tiny("qwen2"), "--ids", ids, "--out", "out.h5", "--device", "cpu"},
                         "out.h5", 65536, {"PMIX_MCA_gds=hash", "OMPI_MCA_btl=self"});
}

// An output never replaces what it would destroy: a FIFO (or a device such as /dev/null:
// the rename would put a regular file in its place), an input file of the command by
// any option (--image, --config, the trace against the dataset), or a file inside an
// input folder (a Hugging Face model, a checkpoint).
TEST_F(Outputs, NeverReplaceAnInputOrASpecialFile) {
  make_dataset("ds.h5");
  ASSERT_EQ(mkfifo(path("pipe").c_str(), 0644), 0);
  refused({"data", "build", "--data.from", "jsonl", "--data.input", "src/caps.jsonl", "--data.out", "pipe"},
          {"pipe: exists and is not a regular file"});
  EXPECT_TRUE(fs::is_fifo(path("pipe")));
  fs::copy(hf_tiny("siglip"), path("hf"));
  const std::vector<std::string> features{"vision", "features", "--device", "cpu", "--vision.hf", "hf", "--image",
                                          "src/im0.png", "--out"};
  const auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  refused(with(features, {"src/im0.png"}), {"src/im0.png: the output is the input of --image"});
  refused(with(features, {"hf/model.safetensors"}), {"hf/model.safetensors: inside hf, the folder of --vision.hf"});
  write("enc.cfg", "[vision]\nimage_size = 32\n");
  refused(with(features, {"enc.cfg", "--config", "enc.cfg"}), {"enc.cfg: the output is the input of --config"});
  make_tokenizer("ds.h5");
  const std::vector<std::string> train{"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", "ds.h5",
                                       "--data.tokenizer", "tok.json", "--train.steps", "1", "--scheduler.trace"};
  refused(with(train, {"ds.h5"}), {"ds.h5: the output is the input of --data.path"});
  refused(with(train, {"tok.json"}), {"tok.json: the output is the input of --data.tokenizer"});
}

// A checkpoint folder that cannot be made is refused before training, not at the save.
TEST_F(Outputs, AnUnusableCheckpointFolderIsRefusedFirst) {
  make_dataset("ds.h5");
  make_tokenizer("ds.h5");
  write("afile", "not a folder");
  refused({"train", "--config", source_dir() + "/configs/tiny.cfg", "--data.path", "ds.h5", "--data.tokenizer",
           "tok.json", "--train.steps", "100000", "--train.ckpt_dir", "afile/ck"},
          {"--train.ckpt_dir afile/ck: cannot create the checkpoint folder"});
}

}  // namespace
}  // namespace vlm::robustness

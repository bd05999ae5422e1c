// The seed corpus of every fuzz target, generated from the test data at build time:
//   fuzz_seeds OUT_DIR SOURCE_DIR
// writes OUT_DIR/<target>/<seed> for the targets of tests/fuzz/CMakeLists.txt:
//  - safetensors: the hf_tiny fixtures (shards and reference files) and small files made
//    by write_safetensors (f32 and bf16, empty tensors, metadata);
//  - config_json: the hf_tiny config.json files (Llama, Qwen2, LLaVA, SigLIP);
//  - tokenizer: byte-level BPE tokenizers trained on the fixtures' text, GPT-2 style and
//    with the Qwen2 / Llama-3 split regexes, with added tokens;
//  - ini, jsonl, image, h5_dataset: inputs in each target's format (its file comment),
//    the images re-encoded from the SigLIP fixture image as PNG (RGB, grey, RGBA,
//    16-bit) and JPEG;
//  - ckpt_shard, ckpt_index: the shards and the index of a small sharded save
//    (checkpoint/shard_format.h).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "base/config.h"
#include "checkpoint/shard_format.h"
#include "data/text/tokenizer.h"
#include "fuzz_util.h"
#include "io/crc32c.h"
#include "io/safetensors.h"

using namespace vlm;
namespace fs = std::filesystem;

namespace {

std::string g_out;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_out + "/" + target);
  fuzz::write_bytes(g_out + "/" + target + "/" + name, bytes.data(), bytes.size());
}

std::string png(const cv::Mat& m, const char* ext = ".png", std::vector<int> params = {}) {
  std::vector<uchar> buf;
  cv::imencode(ext, m, buf, params);
  return std::string(buf.begin(), buf.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_seeds OUT_DIR SOURCE_DIR\n";
    return 2;
  }
  g_out = argv[1];
  const std::string tiny = std::string(argv[2]) + "/tests/data/hf_tiny/";

  // ckpt_shard, ckpt_index: a save of two ranks (checkpoint/shard_format.h): a [2,3]
  // tensor split by rows, a [4] tensor split by a ZeRO-like element range, their shards
  // (data, header, trailer) and the index built from the headers.
  {
    std::vector<std::string> headers;
    for (int r = 0; r < 2; ++r) {
      ShardHeader h;
      h.save = "5eed01", h.step = 3, h.rank = r, h.world = 2;
      std::string data;
      const auto piece = [&](const std::string& name, const Dims& shape, const TensorRegion& reg) {
        ShardPiece p;
        p.tensor = name, p.shape = shape, p.region = reg, p.at = int64_t(data.size());
        std::string bytes(size_t(p.bytes()), '\0');
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(17 * i + r);
        p.crc32c = crc32c(bytes.data(), bytes.size());
        data += bytes;
        h.pieces.push_back(p);
      };
      piece("model/llm/a", {2, 3}, TensorRegion{{r, 0}, {1, 3}, 0, 3});
      piece("optim/m/llm/b", {4}, TensorRegion{{0}, {4}, 2 * r, 2 * r + 2});
      const std::string json = shard_header_json(h);
      headers.push_back(json);
      seed("ckpt_shard", "rank_" + std::to_string(r), data + json + shard_trailer(json.size()));
    }
    CheckpointState st;
    st.step = 3, st.seed = 1234, st.saved_tp = 2, st.saved_dp = 1, st.global_batch = 8;
    const TextFile config{"config.5eed01.ini", 10, 1}, options{"options.5eed01.ini", 5, 2}, tokenizer{"tokenizer.5eed01.json", 7, 3};
    seed("ckpt_index", "two_ranks", index_json(build_index("5eed01", st, config, options, tokenizer, headers)));
  }

  // safetensors
  for (const char* f : {"llama/reference.safetensors", "qwen2/model-00004-of-00004.safetensors",
                        "qwen2/reference.safetensors", "siglip/reference.safetensors"})
    seed("safetensors", fs::path(f).parent_path().string() + "_" + fs::path(f).filename().string(),
         fuzz::read_bytes(tiny + f));
  const std::string tmp = fuzz::scratch("seed.safetensors");
  write_safetensors(tmp, {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}, DType::F32}, {"b", {4}, {1, -2, 3.5f, 0}, DType::BF16},
                          {"empty", {0, 3}, {}, DType::F32}},
                    {{"format", "pt"}});
  seed("safetensors", "small_f32_bf16", fuzz::read_bytes(tmp));
  write_safetensors(tmp, {{"scalar", {}, {7}, DType::F32}});
  seed("safetensors", "scalar", fuzz::read_bytes(tmp));

  // config.json
  for (const char* m : {"llama", "qwen2", "llava", "siglip", "siglip_full"})
    seed("config_json", m, fuzz::read_bytes(tiny + m + "/config.json"));

  // tokenizer.json: trained on the text of the fixtures' configs
  std::vector<std::string> texts;
  for (const char* m : {"llama", "qwen2", "llava", "siglip"}) texts.push_back(fuzz::read_bytes(tiny + m + "/config.json"));
  texts.push_back("A photo of a cat. Two dogs on a sofa, 1234 caf\xC3\xA9.");
  const std::string gpt2 = Tokenizer::train(texts, 320).to_json();
  seed("tokenizer", "gpt2_style", gpt2);
  const std::string bytelevel =
      R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  std::string qwen = gpt2;
  const std::string split =
      R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
  if (const size_t at = qwen.find(bytelevel); at != std::string::npos) qwen.replace(at, bytelevel.size(), split);
  seed("tokenizer", "qwen2_style", qwen);
  seed("tokenizer", "bytes_only", Tokenizer().to_json());

  // ini: mode byte 0 = INI file, 1 = command-line words (fuzz_ini.cpp)
  {
    Config c("vlm fuzz");
    c.add_choice("device", "auto", {"auto", "cpu", "cuda"}, "device");
    c.add_int("seed", 1234, "seed", 0, INT64_MAX);
    c.add_int("parallel.tp", 1, "tp", 1, 1 << 16);
    c.add_string("data.out", "", "output");
    c.add_int_list("ids", "", "ids", 0, INT32_MAX);
    const char* args[] = {"vlm", "--parallel.tp=4", "--data.out", "runs/a #1", "--ids", "1,2,3", "--device", "cpu"};
    c.parse(8, args);
    seed("ini", "dump", std::string(1, '\0') + c.dump_ini());
  }
  seed("ini", "quoted", std::string(1, '\0') + "# comment\ndevice = cpu ; note\n[parallel]\ntp = 2\n[data]\nout = \"a # b \"\n");
  seed("ini", "argv", std::string(1, '\1') + "FILE\n--tp\n8\n--data.from=jsonl\n--data.allow_outside_images\n--ids\n1,2\n--\n-x");

  // jsonl / llava: mode byte bit 0 = llava (fuzz_jsonl.cpp); images a.png, sub/b.png, bad.png, c.txt
  seed("jsonl", "jsonl", std::string(1, '\x02') +
                             "{\"image\": \"a.png\", \"caption\": \"a cat\"}\n"
                             "{\"image\": \"sub/b.png\", \"captions\": [\"one\", \"two\"], \"prompt\": \"Describe.\"}\n"
                             "\n{\"image\": \"bad.png\", \"caption\": \"broken\"}\n"
                             "{\"image\": \"a.png\", \"caption\": \"caf\\u00e9 again\"}\n");
  seed("jsonl", "llava", std::string(1, '\x03') +
                             R"([{"id": "1", "image": "a.png", "conversations": [{"from": "human", "value": "<image>\nWhat is it?"}, {"from": "gpt", "value": "A cat."}]},
 {"id": "2", "conversations": [{"from": "human", "value": "text only"}, {"from": "gpt", "value": "x"}]},
 {"id": "3", "image": "sub/b.png", "conversations": [{"from": "gpt", "value": "Something."}]}])");
  seed("jsonl", "escape", std::string(1, '\x00') + "{\"image\": \"../img/a.png\", \"caption\": \"x\"}\n");

  // image
  const std::string fixture = fuzz::read_bytes(tiny + "siglip/image.png");
  seed("image", "fixture_png", fixture);
  const cv::Mat m = cv::imdecode(cv::Mat(1, int(fixture.size()), CV_8U, const_cast<char*>(fixture.data())),
                                 cv::IMREAD_UNCHANGED);
  cv::Mat small, grey, rgba, deep;
  cv::resize(m, small, cv::Size(24, 16));
  cv::cvtColor(small, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(small, rgba, cv::COLOR_BGR2BGRA);
  small.convertTo(deep, CV_16U, 257.0);
  seed("image", "small_png", png(small));
  seed("image", "grey_png", png(grey));
  seed("image", "rgba_png", png(rgba));
  seed("image", "deep_png", png(deep));
  seed("image", "jpeg", png(small, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 80}));
  seed("image", "progressive_jpeg", png(small, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}));

  // h5_dataset: edit programs (fuzz_h5_dataset.cpp); the empty one opens the base file
  seed("h5_dataset", "none", "");
  seed("h5_dataset", "raw_base", std::string(1, '\1'));
  seed("h5_dataset", "edits", std::string("\0\x05\x01\x02\x03\x00\x07\x11\x22\x33\x44\x55\x66\x77\x88\x99", 16));
  std::cout << "fuzz_seeds: corpus in " << g_out << "\n";
  return 0;
}

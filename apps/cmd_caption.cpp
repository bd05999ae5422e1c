// `vlm caption`: captions one image with a trained model (docs/caption-and-eval.md, "Captioning"):
//   vlm caption --checkpoint C --image X.png [--prompt "..."] [--save-relevance out.png]
//               [--temperature T --top-k K --seed S] [--max-new N] [--tp N] [--device ...]
// The image goes through data/'s pipeline as the loader sends it to training (decode,
// letterbox to vision.image_size on the loader's background, the texture array with
// the loader's options), the model is the checkpoint's (checkpoint/checkpoint.h
// load_trained_model, any tp), the prompt is the run's text rule (BOS + --prompt, or the
// run's data.prompt), and the caption is decoded with the KV cache (model/generate.h):
// greedy by default, sampled with --temperature > 0 (top-k and the seed). World rank 0
// prints the caption, the visual tokens the level-of-detail allocator gave the image
// and the balancer's weights of the three scorers, and writes the relevance picture
// (model/evaluate.h) when asked. Inputs (options, the image, the output path) are
// checked on every rank in one agreed step before the model is loaded (the error
// policy of parallel/runtime.h); a missing or bad checkpoint is refused the same way.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "base/utf8.h"
#include "checkpoint/checkpoint.h"
#include "core/device_options.h"
#include "data/image/image_pipeline.h"
#include "data/image/png.h"
#include "data/image/texture.h"
#include "data/load/loader.h"
#include "io/atomic_file.h"
#include "model/evaluate.h"
#include "model/generate.h"
#include "parallel/runtime.h"
#include "train/trained_model.h"

namespace vlm {

namespace {

struct CaptionInputs {
  std::string checkpoint, image, prompt, relevance;
  float temperature = 0;
  int top_k = 0, max_new = 24;
};

const OptionSet<CaptionInputs>& caption_inputs() {
  static const OptionSet<CaptionInputs> set([](OptionSet<CaptionInputs>& s) {
    s.option("checkpoint", &CaptionInputs::checkpoint,
             "a checkpoint of vlm train: a step_N folder, a step_N.h5 file, or a checkpoint folder (its `latest`)");
    s.option("image", &CaptionInputs::image, "the image to caption (PNG or JPEG)");
    s.option("prompt", &CaptionInputs::prompt, "the instruction (empty: the run's data.prompt)");
    s.option("save-relevance", &CaptionInputs::relevance,
             "write the relevance picture (heatmap + level-of-detail grid) to this PNG");
    s.option("temperature", &CaptionInputs::temperature, "0: greedy decoding; > 0: sample from softmax(logits / T)")
        .range(0, 100);
    s.option("top-k", &CaptionInputs::top_k, "sample among the K most likely tokens (0 = all; with --temperature)")
        .range(0, INT32_MAX);
    s.option("max-new", &CaptionInputs::max_new,
             "caption tokens at most (the run's train.max_text bounds prompt + caption)")
        .range(1, 1 << 16);
  });
  return set;
}

void caption_options(Config& cfg) {
  caption_inputs().add_to(cfg);
  register_runtime_options(cfg);  // parallel.*, device, seed (the sampling seed)
}

int caption(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  const CaptionInputs in = caption_inputs().read(cfg);
  const std::string &image = in.image, &relevance = in.relevance;
  GenerateOptions g;
  g.max_new = in.max_new;
  g.decode.temperature = in.temperature;
  g.decode.top_k = in.top_k;
  g.decode.seed = read_device_options(cfg).seed;
  RgbImage rgb;
  rt.on_every_rank("inputs", [&] {
    VLM_REQUIRE(!in.checkpoint.empty(), "--checkpoint: a checkpoint file or folder is required");
    VLM_REQUIRE(!image.empty(), "--image: an image file is required");
    VLM_REQUIRE(g.decode.top_k == 0 || g.decode.temperature > 0, "--top-k ", g.decode.top_k,
                " needs --temperature > 0 (greedy decoding takes the top token)");
    if (!relevance.empty()) {
      // The picture is PNG bytes: a name that says otherwise would mislabel the file.
      std::string ext = relevance.size() >= 4 ? relevance.substr(relevance.size() - 4) : "";
      for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));  // unsigned: UTF-8 bytes too
      VLM_REQUIRE(ext == ".png", "--save-relevance ", relevance,
                  ": expected a path ending in .png (the picture is written as PNG)");
      check_output_path(relevance, cfg, {{"--checkpoint", in.checkpoint}, {"--image", image}});
    }
    require_utf8(in.prompt, "--" + caption_inputs().name_of(&CaptionInputs::prompt));
    rgb = read_rgb_file(image, "--image");
  });
  TrainedModel tm = load_trained_model(in.checkpoint, rt, 1);
  const int S = tm.vcfg.vision.image_size, G = tm.vcfg.vision.grid();

  // One sample, prepared as the loader prepares its batches (data/load/loader.h).
  const LoaderOptions lo;
  Batch b;
  b.S = S, b.G = G;
  b.caption_index = {0}, b.image_index = {0}, b.is_pad = {0}, b.token_lengths = {0};
  b.images_u8.resize(size_t(S) * S * 3);
  letterbox_into(rgb.view(), S, lo.background, b.images_u8.data());
  b.texture.resize(size_t(kTextureChannels) * G * G);
  compute_texture(ImageView::packed(b.images_u8.data(), S, S), G, b.texture.data(), lo.texture_options);
  if (!in.prompt.empty()) {
    b.prompt_tokens = tm.tok->encode(in.prompt);
    b.prompt_lengths = {int32_t(b.prompt_tokens.size())};
    // BOS, the prompt and room for a caption token: generate_captions stops before a
    // token that would bring prompt + caption + 1 to train.max_text (model/generate.h).
    rt.on_every_rank("prompt", [&] {
      const int64_t most = tm.rule.max_text - 3;
      VLM_REQUIRE(int64_t(b.prompt_tokens.size()) <= most, "--", caption_inputs().name_of(&CaptionInputs::prompt), ": ",
                  b.prompt_tokens.size(), " tokens; the checkpoint's model reads prompts of at most ", most,
                  " (its train.max_text of ", tm.rule.max_text, " holds BOS, the prompt and the caption)");
    });
  }
  TextRule rule = tm.rule;
  rule.captions = false;
  const MicroBatch mb = make_micro_batch(b, rule, g.decode.seed);

  VlmModel& model = *tm.model;
  Stream& s = rt.backend().default_stream();
  model.front_forward(s, mb);
  g.eos = tm.tok->eos();
  const std::vector<std::vector<int32_t>> gen = generate_captions(model, s, mb.prompt, g);
  s.synchronize();
  const std::vector<float> w = to_vector_f32(model.stage().balancer().weights());
  std::vector<uint8_t> picture;
  int side = 0;
  if (!relevance.empty()) picture = relevance_picture(model, s, b, 0, &side);
  if (rt.root()) {
    const ScorerOptions& sc = tm.vcfg.scorers;
    std::printf("vlm caption: %s (checkpoint step %lld, tp=%d, %s)\n", image.c_str(), (long long)tm.state.step,
                rt.topology().tp(), g.decode.greedy() ? "greedy" : "sampled");
    std::printf("caption: %s\n", tm.tok->decode(gen[0]).c_str());
    std::printf("visual tokens: %lld (lod %lld..%lld)\n",
                (long long)(model.visual_offsets()[1] - model.visual_offsets()[0]), (long long)sc.lod.min_tokens,
                (long long)sc.lod.max_tokens);
    std::printf("balancer weights: propositional %.4f, perspectival %.4f, participatory %.4f\n", w[0], w[1], w[2]);
    if (!relevance.empty()) {
      write_file_atomic(relevance, encode_png(picture.data(), side, side, 3));
      std::printf("relevance picture: %s (%dx%d)\n", relevance.c_str(), side, side);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

VLM_COMMAND(caption, {.path = "caption",
                      .summary = "caption one image with a trained checkpoint (KV-cache decoding)",
                      .usage = "--checkpoint C --image X.png [--prompt \"...\"] [--save-relevance out.png]\n"
                               "  [--temperature T --top-k K --seed S] [--max-new N] [--tp N] [--device auto|cpu|cuda]\n"
                               "Prints the caption, the visual tokens used and the mean balancer weights of the three "
                               "scorers. Under mpirun the world is tp x dp. See docs/caption-and-eval.md.",
                      .options = caption_options,
                      .run = caption,
                      .multi_rank = true});

}  // namespace vlm

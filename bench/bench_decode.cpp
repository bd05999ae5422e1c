// Caption decoding benchmark of the VLM at TP=1: tokens/s of the full-recompute decoder
// (VlmModel::greedy_next: the whole [visual | prompt | caption] forward per token) and of
// the KV-cache decoder (decode_start: one prefill, then decode_next: one row per image
// per token), on the model of a config file (default configs/demo_fashion.cfg: vision
// d64 L2, Llama d96 L2, 16 images per batch; vocabulary --vocab unless model.vocab_size
// is set). Both decode the same batch of random images and prompts for --new tokens
// each (no early stop) from the same random-initialised model; the table gives seconds
// per batch (median of --iters), tokens/s = images x new tokens / time, the time of one
// token step, and whether both produced the same tokens. The vision encoder and the
// scorers run once, before the timing. --device cuda runs the same code on a GPU.
// Prints figures, asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/options.h"
#include "core/device_options.h"
#include "model/vlm_model.h"
#include "parallel/groups.h"
#include "parallel/mpi/mpi_session.h"
#include "scorers/options.h"
#include "train/train_options.h"
#include "train/trainer.h"
#include "vision/siglip_config.h"

using namespace vlm;

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

struct BenchOptions {
  std::string model_config = std::string(VLM_SOURCE_DIR) + "/configs/demo_fashion.cfg";
  int64_t vocab = 1024, images = 16;
  int new_tokens = 16;
  int64_t prompt = 5;
  int iters = 3;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("model_config", &BenchOptions::model_config,
             "INI file of the model (read after the command line, which wins)");
    s.option("vocab", &BenchOptions::vocab,
             "vocabulary when model.vocab_size is not set (./run demo's tokenizer: 1024)")
        .range(2, 1 << 22);
    s.option("images", &BenchOptions::images, "images per batch (the demo's train.batch)").range(1, 1 << 16);
    s.option("new", &BenchOptions::new_tokens, "tokens decoded per image (the demo's eval.max_new)").range(1, 1 << 16);
    s.option("prompt", &BenchOptions::prompt, "prompt tokens per image (BOS + instruction)").range(1, 1 << 16);
    s.option("iters", &BenchOptions::iters, "timed batches per decoder (median)").range(1, 1 << 16);
  });
  return set;
}

VlmConfig model_of(const Config& cfg, const BenchOptions& o) {
  VlmConfig v;
  v.vision = resolve_vision_config(cfg);
  v.llm = read_model_config(cfg);
  if (!model_options().is_set(cfg, &ModelConfig::vocab_size)) v.llm.vocab_size = o.vocab;
  v.llm.validate(1);
  v.scorers = read_scorer_options(cfg);
  v.scorers.validate(v.vision.grid(), 1);
  v.max_images = o.images;
  v.max_text = read_train_options(cfg).max_text;
  return v;
}

struct Run {
  double seconds = 0, step_ms = 0, prefill_ms = 0;
  std::vector<std::vector<int32_t>> tokens;
};

// One batch decoded `n_new` tokens per image by either decoder.
Run decode(VlmModel& m, Stream& s, int64_t B, int n_new, bool kv) {
  Run r;
  r.tokens.assign(size_t(B), {});
  const auto t0 = clock_type::now();
  std::vector<int32_t> next;
  double first = 0;
  for (int t = 0; t < n_new; ++t) {
    if (kv)
      next = t == 0 ? m.decode_start(s) : m.decode_next(s, next);
    else
      next = m.greedy_next(s, r.tokens);
    for (int64_t b = 0; b < B; ++b) r.tokens[size_t(b)].push_back(next[size_t(b)]);
    if (t == 0) first = since(t0);
  }
  r.seconds = since(t0);
  r.prefill_ms = 1e3 * first;
  r.step_ms = n_new > 1 ? 1e3 * (r.seconds - first) / (n_new - 1) : 0;
  return r;
}

Run median(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  Config cfg("bench_decode", "");
  register_all_train_options(cfg);
  bench_options().add_to(cfg);
  try {
    if (!cfg.parse(argc, argv)) return 0;
    cfg.read_ini(bench_options().read(cfg).model_config);
    const BenchOptions args = bench_options().read(cfg);  // with what the model's file sets
    const VlmConfig v = model_of(cfg, args);
    const int64_t B = v.max_images, P = args.prompt;
    const int n_new = args.new_tokens, iters = args.iters;
    VLM_REQUIRE(P + n_new <= v.max_text, "--prompt + --new = ", P + n_new, " exceed train.max_text=", v.max_text);
    Backend& b = backend_from_config(cfg);
    Stream& s = b.default_stream();
    auto tp = make_communicator(b.device(), MPI_COMM_SELF, "tp", 600.0);
    auto self = make_communicator(b.device(), MPI_COMM_SELF, "self", 600.0);
    VlmModel model(v, b, *tp, *self);
    model.init(read_device_options(cfg).seed);

    // A batch of random images, texture arrays and prompts (no captions).
    const int64_t S = v.vision.image_size, G = v.vision.grid();
    std::vector<uint8_t> pixels(size_t(B * S * S * 3));
    std::vector<float> texture(size_t(B * 13 * G * G));
    uint64_t x = 88172645463325252ull;
    auto rnd = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17, x; };
    for (uint8_t& p : pixels) p = uint8_t(rnd() % 256);
    for (float& t : texture) t = float(int(rnd() % 2001) - 1000) / 1000.f;
    MicroBatch mb;
    mb.images = B, mb.pixels = pixels.data(), mb.texture = texture.data();
    mb.prompt.assign(size_t(B), {}), mb.caption.assign(size_t(B), {});
    for (auto& p : mb.prompt)
      for (int64_t i = 0; i < P; ++i) p.push_back(int32_t(rnd() % uint64_t(v.llm.vocab_size)));
    model.front_forward(s, mb);
    const double visual = double(model.visual_offsets()[size_t(B)]) / double(B);

    std::vector<Run> full, kv;
    decode(model, s, B, 2, true);  // warm-up: plans the cache, touches every buffer
    decode(model, s, B, 2, false);
    for (int i = 0; i < iters; ++i) {
      full.push_back(decode(model, s, B, n_new, false));
      kv.push_back(decode(model, s, B, n_new, true));
    }
    const Run f = median(full), k = median(kv);
    const double tokens = double(B) * n_new;
    std::printf("bench_decode: %s; %s\n", v.llm.str().c_str(), b.description().c_str());
    std::printf("vision d%lld L%d, %lld images x %d new tokens, prompt %lld tokens, %.1f visual tokens per image "
                "(lod %lld..%lld), KV cache %.2f MiB\n",
                (long long)v.vision.d_model, v.vision.n_layers, (long long)B, n_new, (long long)P, visual,
                (long long)v.scorers.lod.min_tokens, (long long)v.scorers.lod.max_tokens,
                double(model.llm().decode_bytes()) / (1 << 20));
    std::printf("%-16s %12s %12s %16s %14s %9s\n", "decoder", "s / batch", "tokens/s", "ms / token step",
                "first step ms", "speed-up");
    std::printf("%-16s %12.4f %12.0f %16.2f %14.2f %8.2fx\n", "full recompute", f.seconds, tokens / f.seconds,
                f.step_ms, f.prefill_ms, 1.0);
    std::printf("%-16s %12.4f %12.0f %16.2f %14.2f %8.2fx\n", "KV cache", k.seconds, tokens / k.seconds, k.step_ms,
                k.prefill_ms, f.seconds / k.seconds);
    std::printf("same tokens: %s (median of %d batches each)\n", f.tokens == k.tokens ? "yes" : "NO", iters);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_decode: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

// The VLM's KV-cache decoder (VlmModel::decode_start / decode_next, model/generate.h)
// against the full-recompute reference (VlmModel::greedy_next), under mpirun with 1 or
// 2 ranks (TP = world), on a real Fashion-MNIST subset (`vlm data build`'s converter:
// 600 train and 100 test images) with a tiny model trained for 600 AdamW steps (about 4 s):
//  - the greedy captions of the 100 test images are identical token for token, and the
//    trained model says several things (its logits are not uniform: 6 to 8 different
//    captions, e.g. "A small image showing a sneaker.");
//  - at every step of the first batch the cached step's logits equal the full
//    recompute's last-row logits within 1e-5 of the largest logit;
//  - the same with sequence parallelism and full recomputation (an untrained model with
//    wide weights);
//  - sampling: top_k = 1 gives the greedy captions; a seed reproduces its captions, and
//    another seed at temperature 2 changes some;
//  - without an EOS, a caption ends where the training rule cut the text.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "data/convert/converters.h"
#include "data/load/loader.h"
#include "model/batch.h"
#include "model/generate.h"
#include "optim/optimizer.h"
#include "parallel/groups.h"
#include "tests/support/metrics.h"
#include "tests/support/mpi.h"
#include "train/step.h"

namespace vlm {
namespace {

constexpr const char* kFashion = "/usr/share/datasets/fashion-mnist";
constexpr int kBatch = 8, kTestImages = 100, kTrainSteps = 600;

VlmConfig tiny_vlm(int64_t vocab) {  // configs/tiny.cfg, with room for whole captions
  VlmConfig c;
  c.vision.image_size = 16, c.vision.patch = 4, c.vision.d_model = 16, c.vision.n_layers = 1;
  c.vision.n_heads = 2, c.vision.d_ff = 32;
  c.scorers.lod.region = 2, c.scorers.lod.min_tokens = 4, c.scorers.lod.max_tokens = 10;
  c.scorers.scorers.hidden = 8;
  c.llm.family = ModelFamily::Llama, c.llm.vocab_size = vocab, c.llm.d_model = 32, c.llm.n_layers = 2;
  c.llm.n_heads = 4, c.llm.n_kv_heads = 2, c.llm.d_ff = 64, c.llm.tied_embeddings = false;
  c.max_images = kBatch, c.max_text = 40;
  return c;
}

class DecodeOnData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kFashion)) return;
    const std::string dir = test::shared_scratch_dir("decode_data");
    data_ = dir + "/fm.h5";
    if (test::world_rank() == 0) {
      BuildOptions o;
      o.out = data_, o.limit = 700, o.progress = false;
      build_fashion_mnist(kFashion, o);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    DatasetReader d(data_);
    std::vector<std::string> texts;
    for (int64_t j = 0; j < d.num_captions(); ++j) texts.push_back(d.caption(j));
    tok_ = std::make_shared<const Tokenizer>(Tokenizer::train(texts, 300));
    comm_ = test::world_comm("tp");
    dp_ = test::self_comm("dp");
    self_ = test::self_comm("self");
    rule_.bos = tok_->bos(), rule_.max_text = 40, rule_.instruction = tok_->encode("What is this?");
    model_ = std::make_unique<VlmModel>(tiny_vlm(tok_->vocab_size()), cpu_backend(), *comm_, *self_);
    model_->init(3);
    train();
  }
  static void TearDownTestSuite() { model_.reset(), comm_.reset(), dp_.reset(), self_.reset(); }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << kFashion << " is missing (Debian package dataset-fashion-mnist)";
  }

  static LoaderOptions loader_options(const std::string& split) {
    LoaderOptions o;
    o.path = data_, o.split = split, o.batch_size = kBatch, o.image_size = 16, o.grid = 4, o.threads = 1;
    o.prefetch = 2, o.tokenizer = tok_, o.max_tokens = rule_.max_text;
    return o;
  }
  static void train() {
    Backend& b = cpu_backend();
    const std::vector<bool> all(kNumModules, true);
    sched::StreamSet streams(b);
    DpGrads dpg(model_->modules(), all, *dp_, 0, 25, b);
    VlmStep step(*model_, streams, dpg, all, 1, StepOptions{});
    OptimOptions oo;
    oo.lr = 3e-3;
    AdamW opt(model_->modules(), all, dpg, b, oo);
    Loader loader(loader_options("train"));
    for (int k = 1; k <= kTrainSteps; ++k) {
      Batch batch = loader.next();
      MicroBatch mb = make_micro_batch(batch, rule_, uint64_t(k));
      mb.loss_norm = double(mb.counted());
      model_->zero_grads();
      step.run({mb});
      opt.step(b.default_stream(), k, oo.lr, 1.f);
    }
  }
  // Loads batch `b` (prompts only) and runs the pieces before decoding.
  static MicroBatch prepare(const Batch& b, uint64_t seed) {
    TextRule r = rule_;
    r.captions = false;
    MicroBatch mb = make_micro_batch(b, r, seed);
    Stream& s = cpu_backend().default_stream();
    model_->front_forward(s, mb);
    return mb;
  }
  static GenerateOptions greedy(bool kv) {
    GenerateOptions g;
    g.max_new = 24, g.eos = tok_->eos(), g.kv_cache = kv;
    return g;
  }

  static inline std::string data_;
  static inline std::shared_ptr<const Tokenizer> tok_;
  static inline std::unique_ptr<Communicator> comm_, dp_, self_;
  static inline TextRule rule_;
  static inline std::unique_ptr<VlmModel> model_;
};

TEST_F(DecodeOnData, KvCacheAndFullRecomputeGiveIdenticalCaptions) {
  Stream& s = cpu_backend().default_stream();
  Loader loader(loader_options("test"));
  int images = 0;
  std::set<std::string> said;
  while (images < kTestImages) {
    const Batch b = loader.next();
    const MicroBatch mb = prepare(b, 0);
    const auto kv = generate_captions(*model_, s, mb.prompt, greedy(true));
    const auto full = generate_captions(*model_, s, mb.prompt, greedy(false));
    for (int i = 0; i < b.size() && images < kTestImages; ++i) {
      if (!b.is_pad.empty() && b.is_pad[size_t(i)]) continue;
      ++images;
      EXPECT_EQ(kv[size_t(i)], full[size_t(i)]) << "image " << b.image_index[size_t(i)] << ": kv '"
                                                 << tok_->decode(kv[size_t(i)]) << "', full '"
                                                 << tok_->decode(full[size_t(i)]) << "'";
      said.insert(tok_->decode(kv[size_t(i)]));
    }
  }
  EXPECT_EQ(images, kTestImages);
  std::printf("%zu distinct captions, e.g. '%s'\n", said.size(), said.rbegin()->c_str());
  EXPECT_GE(said.size(), 3u) << "the trained model says little: '" << *said.begin() << "'";
}

TEST_F(DecodeOnData, StepLogitsEqualTheFullRecomputesLastRows) {
  Stream& s = cpu_backend().default_stream();
  Loader loader(loader_options("test"));
  const Batch b = loader.next();
  const MicroBatch mb = prepare(b, 0);
  const int n = b.size();
  std::vector<std::vector<int32_t>> gen(static_cast<size_t>(n));
  std::vector<int32_t> next = model_->decode_start(s);
  for (int step = 0; step < 6; ++step) {
    if (step > 0) {
      for (int i = 0; i < n; ++i) gen[size_t(i)].push_back(next[size_t(i)]);
      next = model_->decode_next(s, next);
    }
    const std::vector<float> cached = to_vector_f32(model_->llm().gather_step_logits(s));  // [n, V]
    const std::vector<int32_t> ref = model_->greedy_next(s, gen);
    const std::vector<float> full = to_vector_f32(model_->llm().gather_logits(s));  // [T, V]
    const int64_t V = model_->config().llm.vocab_size;
    int64_t end = 0;
    for (int i = 0; i < n; ++i) {
      end += model_->visual_offsets()[size_t(i + 1)] - model_->visual_offsets()[size_t(i)] +
             int64_t(mb.prompt[size_t(i)].size() + gen[size_t(i)].size());
      const std::vector<float> want(full.begin() + (end - 1) * V, full.begin() + end * V);
      const std::vector<float> got(cached.begin() + i * V, cached.begin() + (i + 1) * V);
      EXPECT_LE(test::max_rel_err(got, want), 1e-5) << "step " << step << " image " << i;
      EXPECT_EQ(next[size_t(i)], ref[size_t(i)]) << "step " << step << " image " << i;
    }
  }
}

// Sequence parallelism (the prefill pads the batch with a text-only sample that is not
// cached) and full recomputation (one shared set of saved k/v): an untrained model with
// wide weights (init_std 0.2, so the logits are far from uniform) gives the same step
// logits and the same greedy captions as its full recompute.
TEST_F(DecodeOnData, SequenceParallelModelMatchesItsFullRecompute) {
  Stream& s = cpu_backend().default_stream();
  VlmConfig c = tiny_vlm(tok_->vocab_size());
  c.llm.sequence_parallel = true, c.llm.recompute = Recompute::Full, c.llm.init_std = 0.2f;
  VlmModel model(c, cpu_backend(), *comm_, *self_);
  model.init(8);
  Loader loader(loader_options("test"));
  const Batch b = loader.next();
  TextRule r = rule_;
  r.captions = false;
  const MicroBatch mb = make_micro_batch(b, r, 0);
  model.front_forward(s, mb);
  const int n = b.size();
  const int64_t V = c.llm.vocab_size;
  std::vector<std::vector<int32_t>> gen(static_cast<size_t>(n));
  std::vector<int32_t> next = model.decode_start(s);
  for (int step = 0; step < 4; ++step) {
    if (step > 0) {
      for (int i = 0; i < n; ++i) gen[size_t(i)].push_back(next[size_t(i)]);
      next = model.decode_next(s, next);
    }
    const std::vector<float> cached = to_vector_f32(model.llm().gather_step_logits(s));
    EXPECT_EQ(model.greedy_next(s, gen), next) << "step " << step;
    const std::vector<float> full = to_vector_f32(model.llm().gather_logits(s));  // padded batch [T, V]
    int64_t end = 0;
    for (int i = 0; i < n; ++i) {
      end += model.visual_offsets()[size_t(i + 1)] - model.visual_offsets()[size_t(i)] +
             int64_t(mb.prompt[size_t(i)].size() + gen[size_t(i)].size());
      const std::vector<float> want(full.begin() + (end - 1) * V, full.begin() + end * V);
      const std::vector<float> got(cached.begin() + i * V, cached.begin() + (i + 1) * V);
      EXPECT_LE(test::max_rel_err(got, want), 1e-5) << "step " << step << " image " << i;
    }
  }
  EXPECT_EQ(generate_captions(model, s, mb.prompt, greedy(true)), generate_captions(model, s, mb.prompt, greedy(false)));
}

// Without an EOS and with max_new past the text budget, every caption stops by the
// training rule alone (model/generate.h): prompt + caption + 1 == max_text, with both
// decoders.
TEST_F(DecodeOnData, TheTextBudgetEndsACaptionWhereTrainingCutTheText) {
  Stream& s = cpu_backend().default_stream();
  Loader loader(loader_options("test"));
  const Batch b = loader.next();
  const MicroBatch mb = prepare(b, 0);
  const int64_t max_text = model_->config().max_text;
  for (const bool kv : {true, false}) {
    GenerateOptions g = greedy(kv);
    g.eos = -1, g.max_new = int(2 * max_text);
    const auto gen = generate_captions(*model_, s, mb.prompt, g);
    for (size_t i = 0; i < gen.size(); ++i)
      EXPECT_EQ(int64_t(mb.prompt[i].size() + gen[i].size()) + 1, max_text) << "sample " << i << ", kv " << kv;
  }
}

TEST_F(DecodeOnData, SamplingIsSeededAndTopOneIsGreedy) {
  Stream& s = cpu_backend().default_stream();
  Loader loader(loader_options("test"));
  const Batch b = loader.next();
  const MicroBatch mb = prepare(b, 0);
  auto run = [&](float temperature, int top_k, uint64_t seed) {
    GenerateOptions g = greedy(true);
    g.decode.temperature = temperature, g.decode.top_k = top_k, g.decode.seed = seed;
    return generate_captions(*model_, s, mb.prompt, g);
  };
  EXPECT_EQ(run(1.f, 1, 7), run(0.f, 0, 0));
  const auto a = run(2.f, 0, 11);
  EXPECT_EQ(run(2.f, 0, 11), a);
  EXPECT_NE(run(2.f, 0, 12), a);
}

}  // namespace
}  // namespace vlm

// make_micro_batch (model/batch.h): a loader batch's text becomes the model's prompt and
// caption per sample, checked token for token against the rule worked out by hand:
//   prompt  = BOS + the sample's prompt tokens (or the instruction when it has none),
//             at most max_text - 1 tokens;
//   caption = the caption tokens after BOS, EOS included, cut to what max_text leaves;
//   a padding repeat keeps its prompt and gets no caption, so it counts no target.
#include <gtest/gtest.h>

#include <vector>

#include "model/batch.h"

namespace vlm {
namespace {

using Tokens = std::vector<int32_t>;
constexpr int32_t kBos = 1, kEos = 2;

// A batch of u8 images with the given packed captions (each BOS ... EOS) and prompts
// (empty: the sample has none).
Batch batch_of(const std::vector<Tokens>& captions, const std::vector<Tokens>& prompts, const std::vector<uint8_t>& pad) {
  Batch b;
  b.S = 4, b.G = 2;
  const size_t n = captions.size();
  for (size_t i = 0; i < n; ++i) {
    b.caption_index.push_back(int64_t(i)), b.image_index.push_back(int64_t(i));
    b.tokens.insert(b.tokens.end(), captions[i].begin(), captions[i].end());
    b.token_lengths.push_back(int32_t(captions[i].size()));
    b.prompt_tokens.insert(b.prompt_tokens.end(), prompts[i].begin(), prompts[i].end());
    b.prompt_lengths.push_back(int32_t(prompts[i].size()));
  }
  b.is_pad = pad;
  b.images_u8.assign(n * 4 * 4 * 3, 7);
  return b;
}

TextRule rule(int max_text) {
  TextRule r;
  r.bos = kBos, r.instruction = {50, 51}, r.max_text = max_text;
  return r;
}

TEST(MakeMicroBatch, PromptsCaptionsAndTheCountedTargets) {
  // Sample 0 has its own prompt; sample 1 takes the instruction.
  const Batch b = batch_of({{kBos, 10, 11, kEos}, {kBos, 20, kEos}}, {{30, 31, 32}, {}}, {0, 0});
  const MicroBatch mb = make_micro_batch(b, rule(16), 9);
  EXPECT_EQ(mb.images, 2);
  EXPECT_EQ(mb.seed, 9u);
  EXPECT_EQ(mb.pixels, b.images_u8.data());
  EXPECT_EQ(mb.prompt[0], (Tokens{kBos, 30, 31, 32}));
  EXPECT_EQ(mb.prompt[1], (Tokens{kBos, 50, 51}));
  EXPECT_EQ(mb.caption[0], (Tokens{10, 11, kEos}));
  EXPECT_EQ(mb.caption[1], (Tokens{20, kEos}));
  EXPECT_EQ(mb.counted(), 5);
}

TEST(MakeMicroBatch, APaddingRepeatKeepsItsPromptAndCountsNothing) {
  const Batch b = batch_of({{kBos, 10, 11, kEos}, {kBos, 20, 21, 22, kEos}, {kBos, 10, 11, kEos}}, {{}, {}, {}},
                           {0, 0, 1});
  const MicroBatch mb = make_micro_batch(b, rule(16), 0);
  EXPECT_EQ(mb.prompt[2], (Tokens{kBos, 50, 51}));
  EXPECT_EQ(mb.caption[1], (Tokens{20, 21, 22, kEos}));
  EXPECT_TRUE(mb.caption[2].empty());
  EXPECT_EQ(mb.counted(), 3 + 4);  // the two real samples only
  // Without the flag the repeat's caption counts again.
  const Batch unflagged = batch_of({{kBos, 10, 11, kEos}, {kBos, 20, 21, 22, kEos}, {kBos, 10, 11, kEos}},
                                   {{}, {}, {}}, {});
  EXPECT_EQ(make_micro_batch(unflagged, rule(16), 0).counted(), 3 + 4 + 3);
}

TEST(MakeMicroBatch, TheTextBudgetCutsTheCaptionsEndThenThePrompt) {
  // max_text 6: prompt BOS 30 31 (3) leaves 3 caption tokens of 10 11 12 13 EOS.
  const Batch b = batch_of({{kBos, 10, 11, 12, 13, kEos}, {kBos, 20, kEos}}, {{30, 31}, {40, 41, 42, 43, 44, 45, 46}},
                           {0, 0});
  const MicroBatch mb = make_micro_batch(b, rule(6), 0);
  EXPECT_EQ(mb.caption[0], (Tokens{10, 11, 12}));
  // A prompt longer than the budget keeps max_text - 1 tokens, leaving one caption token.
  EXPECT_EQ(mb.prompt[1], (Tokens{kBos, 40, 41, 42, 43}));
  EXPECT_EQ(mb.caption[1], (Tokens{20}));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(mb.prompt[size_t(i)].size() + mb.caption[size_t(i)].size(), 6u);
  EXPECT_EQ(mb.counted(), 3 + 1);
}

TEST(MakeMicroBatch, WithoutCaptionsOnlyThePromptsAreMade) {
  TextRule r = rule(16);
  r.captions = false;
  const MicroBatch mb = make_micro_batch(batch_of({{kBos, 10, kEos}, {kBos, 20, kEos}}, {{30}, {}}, {0, 0}), r, 0);
  EXPECT_EQ(mb.prompt[0], (Tokens{kBos, 30}));
  EXPECT_EQ(mb.prompt[1], (Tokens{kBos, 50, 51}));
  EXPECT_TRUE(mb.caption[0].empty() && mb.caption[1].empty());
  EXPECT_EQ(mb.counted(), 0);
}

TEST(MakeMicroBatch, ABatchWithoutTokensGivesEmptyCaptions) {
  Batch b = batch_of({{}, {}}, {{}, {}}, {});
  b.token_lengths.clear();
  const MicroBatch mb = make_micro_batch(b, rule(16), 0);
  EXPECT_EQ(mb.prompt[0], (Tokens{kBos, 50, 51}));
  EXPECT_EQ(mb.counted(), 0);
}

}  // namespace
}  // namespace vlm

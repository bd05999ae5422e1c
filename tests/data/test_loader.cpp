// Loader: batch shapes and per-sample lengths, texture present, determinism across
// thread counts, exact resume from state(), an undecodable (truncated) PNG skipped and
// counted while the run goes on, destruction with a full prefetch queue, and caption
// boxes mapped into the letterboxed image; the training augmentation (mirror, shift).
#include <gtest/gtest.h>

#include <algorithm>

#include <opencv2/imgcodecs.hpp>

#include "data/load/loader.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"
#include "tests/support/errors.h"
#include "test_util.h"

using namespace vlm;

namespace {
// 12 images (image 5 is a truncated PNG), one caption each; all in train.
std::string make_file(const std::string& dir) {
  const std::string path = dir + "/l.h5";
  DatasetWriter w = DatasetWriter::encoded(path);
  std::vector<int64_t> all;
  for (int i = 0; i < 12; ++i) {
    cv::Mat m(24 + i, 40 - i, CV_8UC3, cv::Scalar(20 * i, 100, 255 - 20 * i));
    std::vector<uint8_t> png;
    cv::imencode(".png", m, png);
    if (i == 5) png.resize(png.size() / 2);
    w.add_encoded(png.data(), png.size(), m.rows, m.cols, 3);
    w.add_caption(i, "image number " + std::to_string(i));
    all.push_back(i);
  }
  w.set_split(schema::kSplitTrain, all);
  w.finish();
  return path;
}

std::vector<int64_t> order(Loader& l, int batches) {
  std::vector<int64_t> v;
  for (int k = 0; k < batches; ++k)
    for (int64_t c : l.next().caption_index) v.push_back(c);
  return v;
}
}  // namespace

TEST(Loader, BatchesShapesSkipsAndDeterminism) {
  const std::string path = make_file(test::scratch_dir("loader"));
  LoaderOptions o;
  o.path = path;
  o.batch_size = 4;
  o.image_size = 32;
  o.grid = 4;
  o.threads = 2;
  o.seed = 5;
  o.tokenizer = std::make_shared<Tokenizer>(Tokenizer::train({"image number 1", "image number 2"}, 300));
  Loader l(o);
  EXPECT_EQ(l.num_samples(), 12);
  EXPECT_EQ(l.steps_per_epoch(), 3);
  int total = 0, skipped = 0;
  for (int k = 0; k < 3; ++k) {
    Batch b = l.next();
    const int n = b.size();
    total += n;
    skipped += b.skipped;
    EXPECT_EQ(n + b.skipped, 4);
    EXPECT_EQ(b.images_u8.size(), size_t(n) * 32 * 32 * 3);
    EXPECT_EQ(b.texture.size(), size_t(n) * 13 * 16);
    ASSERT_EQ(b.cu_seqlens.size(), size_t(n) + 1);
    EXPECT_EQ(size_t(b.cu_seqlens.back()), b.tokens.size());
    for (int i = 0; i < n; ++i) {
      const std::vector<int32_t> t(b.tokens.begin() + b.cu_seqlens[size_t(i)],
                                   b.tokens.begin() + b.cu_seqlens[size_t(i) + 1]);
      EXPECT_EQ(int(t.size()), b.token_lengths[size_t(i)]);
      EXPECT_EQ(o.tokenizer->decode(t), "image number " + std::to_string(b.caption_index[size_t(i)]));
      EXPECT_NE(b.caption_index[size_t(i)], 5);
    }
  }
  EXPECT_EQ(total, 11);  // one epoch: every sample once, the broken one skipped
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(l.skipped_total(), 1);

  // Same order with 1 thread (order never depends on thread timing).
  LoaderOptions o1 = o;
  o1.threads = 1;
  Loader l1(o1), l2(o);
  EXPECT_EQ(order(l1, 7), order(l2, 7));
}

TEST(Loader, ResumeAndShutdown) {
  const std::string path = make_file(test::scratch_dir("loader_resume"));
  LoaderOptions o;
  o.path = path;
  o.batch_size = 3;
  o.image_size = 16;
  o.grid = 2;
  o.threads = 2;
  o.prefetch = 3;
  o.float_images = true;
  o.dp_size = 2;
  o.dp_rank = 1;
  SamplerState saved;
  std::vector<int64_t> want;
  {
    Loader a(o);
    order(a, 3);
    saved = a.state();
    want = order(a, 5);
    const Batch b = a.next();
    EXPECT_EQ(b.images_f32.size() + 0 * b.images_u8.size(), size_t(b.size()) * 16 * 16 * 3);
    EXPECT_TRUE(b.tokens.empty());  // no tokenizer and no tokens in the file
  }
  Loader b(o);
  b.restore(saved);
  EXPECT_EQ(order(b, 5), want);
  // Destroying a loader whose queue is full (never consumed) must not hang.
  for (int i = 0; i < 3; ++i) Loader idle(o);
}

TEST(Loader, BadOptionsAreUserErrors) {
  const std::string path = make_file(test::scratch_dir("loader_bad"));
  LoaderOptions o;
  o.path = path;
  o.image_size = 8;
  o.grid = 16;
  EXPECT_THROW(Loader l(o), UserError);
  o.grid = 4;
  o.split = "val";  // empty split
  EXPECT_THROW(Loader l(o), UserError);
}

// A batch none of whose images decodes is an error naming the file (the model takes no
// empty micro-batch), re-thrown by next().
TEST(Loader, ABatchWithoutOneDecodableImageIsAnError) {
  const std::string path = test::scratch_dir("loader_none") + "/none.h5";
  {
    DatasetWriter w = DatasetWriter::encoded(path);
    for (int i = 0; i < 2; ++i) {
      cv::Mat m(20, 20, CV_8UC3, cv::Scalar(10, 20, 30));
      std::vector<uint8_t> png;
      cv::imencode(".png", m, png);
      png.resize(png.size() / 2);
      w.add_encoded(png.data(), png.size(), 20, 20, 3);
      w.add_caption(i, "broken");
    }
    w.set_split(schema::kSplitTrain, {0, 1});
    w.finish();
  }
  LoaderOptions o;
  o.path = path;
  o.batch_size = 2;
  o.image_size = 16;
  o.grid = 4;
  Loader l(o);
  const std::string e = test::error_of([&] { l.next(); });
  EXPECT_NE(e.find(path + ": none of the 2 images of a batch decodes"), std::string::npos) << e;
}

// Caption boxes and labels (schema version 2) follow the letterbox: a 40 x 20 (W x H)
// image on a 32 x 32 canvas is scaled by 0.8 and centred 8 rows down; a 20 x 40 one is
// centred 8 columns across. A file without them gives empty arrays.
TEST(Loader, BoxesFollowTheLetterbox) {
  const std::string path = test::scratch_dir("loader_boxes") + "/b.h5";
  {
    DatasetWriter w = DatasetWriter::encoded(path);
    for (const auto& [h, wd] : {std::pair{20, 40}, std::pair{40, 20}}) {
      std::vector<uint8_t> png;
      cv::imencode(".png", cv::Mat(h, wd, CV_8UC3, cv::Scalar(9, 9, 9)), png);
      w.add_encoded(png.data(), png.size(), h, wd, 3);
    }
    w.add_caption(0, "wide");
    w.add_caption(1, "tall");
    w.set_caption_boxes({10, 5, 30, 15, 2, 4, 18, 40});
    w.set_caption_labels({1, 0}, {"a", "b"});
    w.set_split(schema::kSplitTrain, {0, 1});
    w.finish();
  }
  LoaderOptions o;
  o.path = path;
  o.batch_size = 2;
  o.image_size = 32;
  o.grid = 4;
  o.threads = 1;
  Loader l(o);
  const Batch b = l.next();
  ASSERT_EQ(b.size(), 2);
  for (int k = 0; k < 2; ++k) {
    const bool wide = b.caption_index[size_t(k)] == 0;
    const std::vector<float> want = wide ? std::vector<float>{8, 8 + 4, 24, 8 + 12}
                                         : std::vector<float>{8 + 1.6f, 3.2f, 8 + 14.4f, 32};
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(b.boxes[size_t(4 * k + c)], want[size_t(c)], 1e-5) << k << " " << c;
    EXPECT_EQ(b.labels[size_t(k)], wide ? 1 : 0);
  }
  o.path = make_file(test::scratch_dir("loader_no_boxes"));
  Loader plain(o);
  const Batch p = plain.next();
  EXPECT_TRUE(p.boxes.empty());
  EXPECT_TRUE(p.labels.empty());
}

// data.flip / data.shift (data/image/augment.h): every training image is the unaugmented
// one mirrored and/or moved by one of the (2*shift+1)^2 offsets, found here by trying
// every candidate against a pixel loop of the test's own; the caption box moves with it;
// the draws are independent of the loader threads, differ between epochs, and mirror
// about half of the images.
TEST(Loader, AugmentationMirrorsAndShiftsPixelsAndBoxes) {
  constexpr int S = 32, kShift = 3, kImages = 24;
  const std::string path = test::scratch_dir("loader_augment") + "/a.h5";
  {
    DatasetWriter w = DatasetWriter::encoded(path);
    std::vector<int32_t> boxes;
    std::vector<int64_t> all;
    for (int i = 0; i < kImages; ++i) {
      cv::Mat m(S, S, CV_8UC3);
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uint8_t(1 + x * 7 + i), uint8_t(1 + y * 7), 200);
      std::vector<uint8_t> png;
      cv::imencode(".png", m, png);
      w.add_encoded(png.data(), png.size(), S, S, 3);
      w.add_caption(i, "image " + std::to_string(i));
      boxes.insert(boxes.end(), {2 + i % 5, 4, 20, 10 + i % 7});
      all.push_back(i);
    }
    w.set_caption_boxes(boxes);
    w.set_caption_labels(std::vector<int32_t>(size_t(kImages), 0), {"x"});
    w.set_split(schema::kSplitTrain, all);
    w.finish();
  }
  LoaderOptions o;
  o.path = path;
  o.batch_size = kImages;
  o.image_size = S;
  o.grid = 4;
  o.threads = 2;
  o.seed = 11;
  o.background = 0;
  Loader plain_loader(o);
  const Batch plain = plain_loader.next();
  ASSERT_EQ(plain.size(), kImages);
  auto row_of = [](const Batch& b, int64_t cap) {
    return int(std::find(b.caption_index.begin(), b.caption_index.end(), cap) - b.caption_index.begin());
  };
  // The test's own transformation of image k of `plain`: mirror, then move by (dx, dy).
  auto expect_pixels = [&](int k, bool flip, int dx, int dy) {
    std::vector<uint8_t> out(size_t(S) * S * 3, 0);
    const uint8_t* src = plain.images_u8.data() + size_t(k) * S * S * 3;
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        const int sy = y - dy, sx0 = x - dx;
        if (sy < 0 || sy >= S || sx0 < 0 || sx0 >= S) continue;
        const int sx = flip ? S - 1 - sx0 : sx0;
        for (int c = 0; c < 3; ++c) out[size_t((y * S + x) * 3 + c)] = src[size_t((sy * S + sx) * 3 + c)];
      }
    return out;
  };
  o.augment.flip = true, o.augment.shift = kShift;
  Loader aug_loader(o);
  LoaderOptions o1 = o;
  o1.threads = 1;
  Loader one_thread(o1);
  std::vector<std::vector<int>> draws(2);  // per epoch: the (flip, dx, dy) code of each caption
  int flipped = 0, moved = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const Batch a = aug_loader.next(), a1 = one_thread.next();
    ASSERT_EQ(a.size(), kImages);
    EXPECT_EQ(a.images_u8, a1.images_u8);
    EXPECT_EQ(a.boxes, a1.boxes);
    draws[size_t(epoch)].assign(kImages, -1);
    for (int r = 0; r < kImages; ++r) {
      const int64_t cap = a.caption_index[size_t(r)];
      const int k = row_of(plain, cap);
      const std::vector<uint8_t> got(a.images_u8.begin() + ptrdiff_t(r) * S * S * 3,
                                     a.images_u8.begin() + ptrdiff_t(r + 1) * S * S * 3);
      int matches = 0, code = -1;
      for (int f = 0; f < 2; ++f)
        for (int dy = -kShift; dy <= kShift; ++dy)
          for (int dx = -kShift; dx <= kShift; ++dx)
            if (got == expect_pixels(k, f == 1, dx, dy)) {
              ++matches, code = (f * 7 + dy + kShift) * 7 + dx + kShift;
              const float* pb = plain.boxes.data() + 4 * k;
              float x0 = pb[0], x1 = pb[2];
              if (f == 1) x0 = S - pb[2], x1 = S - pb[0];
              const float want[4] = {std::clamp(x0 + dx, 0.f, float(S)), std::clamp(pb[1] + dy, 0.f, float(S)),
                                     std::clamp(x1 + dx, 0.f, float(S)), std::clamp(pb[3] + dy, 0.f, float(S))};
              for (int c = 0; c < 4; ++c) EXPECT_FLOAT_EQ(a.boxes[size_t(4 * r + c)], want[c]) << cap << " " << c;
              flipped += f, moved += (dx != 0 || dy != 0);
            }
      EXPECT_EQ(matches, 1) << "caption " << cap << " epoch " << epoch;
      draws[size_t(epoch)][size_t(cap)] = code;
    }
  }
  EXPECT_NE(draws[0], draws[1]);  // new draws each epoch
  EXPECT_GE(flipped, kImages * 2 / 4);  // about half of 48 mirrored (a binomial(48, 1/2) in [12, 36])
  EXPECT_LE(flipped, kImages * 2 * 3 / 4);
  EXPECT_GE(moved, kImages * 2 * 3 / 4);  // 48 of 49 offsets move the image
  o.augment.shift = S;
  EXPECT_THROW(Loader bad(o), UserError);
}

// Loader: a prefetching, multi-threaded batch producer over a schema-v1 HDF5 file.
// One sample = one caption and its image (an image with k captions is k samples).
// Invariants:
//  - The order is the DistributedSampler's (sampler.h): deterministic in (seed, epoch,
//    step, dp rank), independent of the number of threads; batches come out in order.
//  - At most `prefetch` batches are built ahead of the consumer (bounded memory).
//  - state() is the sampler position of the next batch next() will return, so
//    restore(state()) after a checkpoint resumes the identical batch sequence.
//  - An undecodable image drops its sample from the batch (Batch::skipped counts it,
//    skipped_total() sums them over the batches next() has returned, a warning is
//    printed (stdout) for the first few and a summary at destruction); a batch may
//    therefore hold fewer than batch_size samples, but not none (a UserError naming the
//    file, re-thrown by next()).
//  - Destruction stops and joins every worker; it never waits for work in flight to
//    be consumed. A worker's exception is re-thrown by next().
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "data/image/augment.h"
#include "data/image/texture.h"
#include "data/load/sampler.h"
#include "data/storage/dataset.h"
#include "data/text/tokenizer.h"

namespace vlm {

struct LoaderOptions {
  std::string path;             // HDF5 file
  std::string split = "train";  // train | val | test | all
  int batch_size = 8;           // per DP rank
  int image_size = 224;         // S: working size (letterboxed square)
  int grid = 16;                // G: texture grid
  int threads = 2;
  int prefetch = 4;             // batches
  int dp_size = 1, dp_rank = 0;
  uint64_t seed = 0;
  EpochPolicy policy = EpochPolicy::Pad;
  // > 0: the split is cut to the samples at the first `limit` positions of epoch 0's
  // permutation (DistributedSampler::permutation(n, seed, 0)): the same subset whatever
  // the batch and DP layout, and the samples that the first k steps over the whole split
  // cover when limit = k x batch x dp (an evaluation subset: `vlm eval --images`).
  int64_t limit = 0;
  bool float_images = false;    // images as f32 in [0,1] instead of u8
  bool texture = true;
  TextureOptions texture_options;
  uint8_t background = 0;       // letterbox pad and alpha background
  // Mirror and shift drawn per (seed, epoch, caption), applied after the letterbox
  // (data/image/augment.h); boxes move with the pixels. For training splits only.
  AugmentOptions augment;
  // Tokens: with a tokenizer, captions (and prompts) are encoded on the fly as
  // BOS caption EOS; without one, /captions/tokens of the file is used (already
  // BOS..EOS) or, when absent, batches carry no tokens. Truncated to max_tokens.
  std::shared_ptr<const Tokenizer> tokenizer;
  int max_tokens = 256;
};

struct Batch {
  int64_t epoch = 0, step = 0;  // sampler position of this batch
  int S = 0, G = 0;
  bool float_images = false;    // which of images_u8 / images_f32 holds the images
  int skipped = 0;              // samples dropped (undecodable image)
  std::vector<int64_t> caption_index, image_index;  // [B]
  std::vector<uint8_t> is_pad;                      // [B] 1 = padding repeat (weight 0)
  std::vector<uint8_t> images_u8;                   // [B,S,S,3] RGB (float_images off)
  std::vector<float> images_f32;                    // [B,S,S,3] in [0,1] (float_images on)
  std::vector<float> texture;                       // [B,13,G,G]
  std::vector<int32_t> tokens;                      // caption tokens, packed
  std::vector<int32_t> token_lengths;               // [B]
  std::vector<int32_t> cu_seqlens;                  // [B+1] prefix sums of token_lengths
  std::vector<int32_t> prompt_tokens, prompt_lengths;  // packed / [B] (may be all 0)
  // Files with caption boxes / labels (schema version 2), else empty: the caption's box
  // x0 y0 x1 y1 in pixels of the S x S letterboxed image (image_pipeline.h
  // letterbox_place), and its class id.
  std::vector<float> boxes;     // [B,4]
  std::vector<int32_t> labels;  // [B]

  int size() const { return int(caption_index.size()); }
  // Non-owning host tensor views (valid while the Batch lives).
  Tensor images_tensor() {
    return float_images ? Tensor(images_f32.data(), Shape{size(), S, S, 3}, DType::F32, DeviceKind::CPU)
                        : Tensor(images_u8.data(), Shape{size(), S, S, 3}, DType::U8, DeviceKind::CPU);
  }
  Tensor texture_tensor() {
    return Tensor(texture.data(), Shape{size(), kTextureChannels, G, G}, DType::F32, DeviceKind::CPU);
  }
  Tensor tokens_tensor() {
    return Tensor(tokens.data(), Shape{int64_t(tokens.size())}, DType::I32, DeviceKind::CPU);
  }
};

class Loader {
 public:
  explicit Loader(LoaderOptions opt);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Batch next();
  SamplerState state() const;
  void restore(const SamplerState& s);

  int64_t num_samples() const { return int64_t(samples_.size()); }
  int64_t steps_per_epoch() const { return sampler_->steps_per_epoch(); }
  bool fits(const SamplerState& s) const { return sampler_->fits(s); }  // restore() takes it
  int64_t skipped_total() const { return skipped_total_.load(); }
  const DatasetReader& dataset() const { return *reader_; }

 private:
  void start();
  void stop();
  void worker();
  Batch build(int64_t epoch, int64_t step, const std::vector<SampleRef>& refs);

  LoaderOptions opt_;
  std::unique_ptr<DatasetReader> reader_;
  std::vector<int64_t> samples_;  // caption indices of the split
  std::unique_ptr<DistributedSampler> sampler_;

  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_ready_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
  int64_t next_job_ = 0, consumed_ = 0;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  SamplerState next_state_;
  std::atomic<int64_t> skipped_total_{0};
  std::atomic<int> warnings_{0};
};

}  // namespace vlm

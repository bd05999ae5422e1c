// Implementation of Loader (threads, ordering and shutdown: loader.h).
// Workers take job numbers in order under the mutex together with the sampler's batch
// for that job, build the batch without the lock (HDF5 reads take the HDF5 mutex only
// for the read itself), and hand it to an ordered map that next() drains in order.
#include "data/load/loader.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "data/image/image_pipeline.h"

namespace vlm {

Loader::Loader(LoaderOptions opt) : opt_(std::move(opt)) {
  VLM_REQUIRE(opt_.image_size >= 1 && opt_.grid >= 1 && opt_.grid <= opt_.image_size,
              "loader: grid G=", opt_.grid, " must be in [1, image size S=", opt_.image_size, "]");
  VLM_REQUIRE(opt_.threads >= 1 && opt_.prefetch >= 1, "loader: threads and prefetch must be >= 1");
  VLM_REQUIRE(opt_.augment.shift >= 0 && opt_.augment.shift < opt_.image_size, "loader: a shift of ",
              opt_.augment.shift, " pixels needs 0 <= shift < the image size ", opt_.image_size,
              " (data.shift, vision.image_size)");
  reader_ = std::make_unique<DatasetReader>(opt_.path);
  samples_ = reader_->split_captions(opt_.split);
  VLM_REQUIRE(!samples_.empty(), opt_.path, ": split '", opt_.split, "' has no captions");
  if (opt_.limit > 0 && opt_.limit < int64_t(samples_.size())) {
    const std::vector<int64_t> perm = DistributedSampler::permutation(int64_t(samples_.size()), opt_.seed, 0);
    std::vector<int64_t> kept;
    for (int64_t k = 0; k < opt_.limit; ++k) kept.push_back(samples_[size_t(perm[size_t(k)])]);
    std::sort(kept.begin(), kept.end());
    samples_ = std::move(kept);
  }
  sampler_ = std::make_unique<DistributedSampler>(int64_t(samples_.size()), opt_.batch_size, opt_.dp_size,
                                                  opt_.dp_rank, opt_.seed, opt_.policy);
  next_state_ = sampler_->state();
  start();
}

Loader::~Loader() {
  stop();
  if (skipped_total_ > 0)
    std::printf("loader: %s: skipped %lld undecodable image(s) in total\n", opt_.path.c_str(),
                (long long)skipped_total_.load());
}

void Loader::start() {
  stop_ = false;
  next_job_ = consumed_ = 0;
  ready_.clear();
  error_ = nullptr;
  for (int t = 0; t < opt_.threads; ++t) threads_.emplace_back([this] { worker(); });
}

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  cv_ready_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void Loader::worker() {
  while (true) {
    int64_t job;
    SamplerState at;
    std::vector<SampleRef> refs;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || next_job_ < consumed_ + opt_.prefetch; });
      if (stop_) return;
      job = next_job_++;
      at = sampler_->state();
      refs = sampler_->next();
    }
    try {
      Batch b = build(at.epoch, at.step, refs);
      std::lock_guard<std::mutex> lk(mu_);
      ready_.emplace(job, std::move(b));
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
    cv_ready_.notify_all();
  }
}

Batch Loader::next() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_ready_.wait(lk, [&] { return error_ || ready_.count(consumed_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto it = ready_.find(consumed_);
  Batch b = std::move(it->second);
  ready_.erase(it);
  ++consumed_;
  // Counted here, not in the worker, so the total covers exactly the batches returned and
  // never depends on how far prefetching has run ahead.
  skipped_total_ += b.skipped;
  next_state_ = {next_state_.seed, b.epoch, b.step + 1};
  if (next_state_.step == sampler_->steps_per_epoch()) next_state_.step = 0, next_state_.epoch++;
  lk.unlock();
  cv_work_.notify_all();
  return b;
}

SamplerState Loader::state() const {
  std::lock_guard<std::mutex> lk(mu_);
  return next_state_;
}

void Loader::restore(const SamplerState& s) {
  stop();
  sampler_->restore(s);
  next_state_ = s;
  start();
}

Batch Loader::build(int64_t epoch, int64_t step, const std::vector<SampleRef>& refs) {
  const int S = opt_.image_size, G = opt_.grid;
  const size_t img_elems = size_t(S) * S * 3, tex_elems = size_t(kTextureChannels) * G * G;
  const size_t n = refs.size();
  Batch b;
  b.epoch = epoch, b.step = step, b.S = S, b.G = G, b.float_images = opt_.float_images;
  // Every per-batch array is sized once for the full batch (no regrowth copies) and cut
  // to the kept samples at the end; images are letterboxed straight into their slot.
  for (auto* v : {&b.caption_index, &b.image_index}) v->reserve(n);
  b.is_pad.reserve(n);
  b.token_lengths.reserve(n), b.prompt_lengths.reserve(n), b.cu_seqlens.reserve(n + 1);
  if (opt_.float_images) b.images_f32.resize(n * img_elems);
  else b.images_u8.resize(n * img_elems);
  if (opt_.texture) b.texture.resize(n * tex_elems);
  b.cu_seqlens.push_back(0);
  // Per-thread buffers reused across samples and batches: the encoded bytes and, for
  // float images, the u8 canvas.
  thread_local std::vector<uint8_t> data;
  thread_local std::vector<uint8_t> canvas;
  size_t kept = 0;
  for (const SampleRef& r : refs) {
    const int64_t cap = samples_[size_t(r.index)];
    const int64_t img = reader_->caption_image(cap);
    reader_->image_data(img, data);
    RgbImage rgb;
    if (reader_->raw()) {
      const ImageInfo info = reader_->image_info(img);
      rgb = raw_to_rgb(data.data(), info.height, info.width, info.channels, opt_.background);
    } else {
      rgb = decode_rgb(data.data(), data.size(), opt_.background);
    }
    if (rgb.empty()) {
      ++b.skipped;
      if (warnings_.fetch_add(1) < 10)
        std::printf("loader: warning: %s: image %lld (%zu bytes) cannot be decoded; skipped\n", opt_.path.c_str(),
                    (long long)img, data.size());
      continue;
    }
    // The letterboxed (and augmented) S x S RGB image: in its batch slot, or for float
    // images in the canvas it is converted from.
    uint8_t* sq = opt_.float_images ? (canvas.resize(img_elems), canvas.data()) : b.images_u8.data() + kept * img_elems;
    letterbox_into(rgb.view(), S, opt_.background, sq);
    const Augmentation aug = draw_augmentation(opt_.augment, opt_.seed, epoch, cap);
    apply_augmentation(aug, S, opt_.background, sq);
    if (opt_.float_images) to_unit_float(sq, img_elems, b.images_f32.data() + kept * img_elems);
    if (opt_.texture)
      compute_texture(ImageView::packed(sq, S, S), G, b.texture.data() + kept * tex_elems, opt_.texture_options);
    std::vector<int32_t> toks, ptoks;
    if (opt_.tokenizer) {
      toks = opt_.tokenizer->encode(reader_->caption(cap), true, true);
      const std::string p = reader_->prompt(cap);
      if (!p.empty()) ptoks = opt_.tokenizer->encode(p);
    } else if (reader_->has_tokens()) {
      toks = reader_->tokens(cap);
    }
    if (int(toks.size()) > opt_.max_tokens) toks.resize(size_t(opt_.max_tokens));
    if (int(ptoks.size()) > opt_.max_tokens) ptoks.resize(size_t(opt_.max_tokens));
    b.tokens.insert(b.tokens.end(), toks.begin(), toks.end());
    b.token_lengths.push_back(int32_t(toks.size()));
    b.cu_seqlens.push_back(b.cu_seqlens.back() + int32_t(toks.size()));
    b.prompt_tokens.insert(b.prompt_tokens.end(), ptoks.begin(), ptoks.end());
    b.prompt_lengths.push_back(int32_t(ptoks.size()));
    if (reader_->has_boxes()) {
      const CaptionBox box = reader_->box(cap);
      const LetterboxPlace at = letterbox_place(rgb.height, rgb.width, S);
      const float sx = float(at.w) / float(rgb.width), sy = float(at.h) / float(rgb.height);
      float placed[4] = {float(at.x0) + sx * float(box.x0), float(at.y0) + sy * float(box.y0),
                         float(at.x0) + sx * float(box.x1), float(at.y0) + sy * float(box.y1)};
      augment_box(aug, S, placed);
      b.boxes.insert(b.boxes.end(), placed, placed + 4);
    }
    if (!reader_->caption_labels().empty()) b.labels.push_back(reader_->caption_labels()[size_t(cap)]);
    b.caption_index.push_back(cap);
    b.image_index.push_back(img);
    b.is_pad.push_back(r.is_pad ? 1 : 0);
    ++kept;
  }
  VLM_REQUIRE(kept > 0 || n == 0, opt_.path, ": none of the ", n, " images of a batch decodes (the first: image ",
              reader_->caption_image(samples_[size_t(refs.front().index)]), "); `vlm data inspect ", opt_.path,
              "` lists the damaged images");
  if (opt_.float_images) b.images_f32.resize(kept * img_elems);
  else b.images_u8.resize(kept * img_elems);
  if (opt_.texture) b.texture.resize(kept * tex_elems);
  return b;
}

}  // namespace vlm

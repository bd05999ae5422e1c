// Loader throughput: samples/s with decode + letterbox + 13-channel texture,
// at 1 and 2 worker threads, for working sizes 28x28 (Fashion-MNIST, raw storage) and
// 512x512 (Tux Paint stamps, PNG storage, G = 32). Prints figures; asserts nothing.
// Datasets are converted into the temp directory first (subsets: 4000 Fashion-MNIST
// images, 80 stamps); a source that is not installed is replaced by synthetic PNGs.
// Before the loader runs, a single-threaded per-stage breakdown (HDF5 read, decode,
// letterbox, texture, tokens) shows where one sample's time goes.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "base/error.h"
#include "base/options.h"
#include "core/device_options.h"
#include "data/convert/converters.h"
#include "data/image/image_pipeline.h"
#include "data/load/loader.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"

using namespace vlm;
namespace fs = std::filesystem;

static std::string synthetic(const std::string& path, int n, int size) {
  DatasetWriter w = DatasetWriter::encoded(path);
  std::vector<int64_t> all;
  cv::RNG rng(1);
  for (int i = 0; i < n; ++i) {
    cv::Mat m(size, size, CV_8UC3);
    rng.fill(m, cv::RNG::UNIFORM, 0, 255);
    std::vector<uint8_t> png;
    cv::imencode(".png", m, png);
    w.add_encoded(png.data(), png.size(), size, size, 3);
    w.add_caption(i, "synthetic noise");
    all.push_back(i);
  }
  w.set_split(schema::kSplitTrain, all);
  w.finish();
  return path;
}

// Mean microseconds per sample of each pipeline stage, one thread, the loader's calls.
static void stages(const char* name, const std::string& path, int S, int G, int n) {
  using clock = std::chrono::steady_clock;
  DatasetReader r(path);
  const int64_t caps = r.num_captions();
  double t_read = 0, t_dec = 0, t_box = 0, t_tex = 0, t_tok = 0;
  std::vector<float> tex(size_t(kTextureChannels) * G * G);
  std::vector<uint8_t> data;
  std::vector<uint8_t> sq(size_t(S) * S * 3);
  auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  for (int i = 0; i < n; ++i) {
    const int64_t cap = i % caps, img = r.caption_image(cap);
    const auto t0 = clock::now();
    r.image_data(img, data);
    const auto t1 = clock::now();
    RgbImage rgb;
    if (r.raw()) {
      const ImageInfo info = r.image_info(img);
      rgb = raw_to_rgb(data.data(), info.height, info.width, info.channels);
    } else {
      rgb = decode_rgb(data.data(), data.size());
    }
    const auto t2 = clock::now();
    if (rgb.empty()) continue;
    letterbox_into(rgb.view(), S, 0, sq.data());
    const auto t3 = clock::now();
    compute_texture(ImageView::packed(sq.data(), S, S), G, tex.data());
    const auto t4 = clock::now();
    const std::string c = r.caption(cap);
    const auto t5 = clock::now();
    t_read += us(t0, t1), t_dec += us(t1, t2), t_box += us(t2, t3), t_tex += us(t3, t4), t_tok += us(t4, t5);
  }
  const double total = t_read + t_dec + t_box + t_tex + t_tok;
  std::printf("%-14s S=%-4d G=%-3d per sample (us): read %.0f  decode %.0f  letterbox %.0f  texture %.0f"
              "  caption %.0f  = %.0f (%.0f samples/s on one thread)\n",
              name, S, G, t_read / n, t_dec / n, t_box / n, t_tex / n, t_tok / n, total / n, 1e6 * n / total);
}

static void run(const char* name, const std::string& path, int S, int G, int threads, int batches) {
  LoaderOptions o;
  o.path = path;
  o.split = "all";
  o.batch_size = 16;
  o.image_size = S;
  o.grid = G;
  o.threads = threads;
  o.prefetch = 2 * threads;
  Loader l(o);
  l.next();  // warm-up (thread start, first reads)
  const auto t0 = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int k = 0; k < batches; ++k) samples += l.next().size();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-14s S=%-4d G=%-3d threads=%d  %8.0f samples/s  (%lld samples in %.2f s)\n", name, S, G,
              threads, double(samples) / s, (long long)samples, s);
}

struct BenchOptions {
  int threads = 2;
};

const OptionSet<BenchOptions>& bench_options() {
  static const OptionSet<BenchOptions> set([](OptionSet<BenchOptions>& s) {
    s.option("threads", &BenchOptions::threads, "largest number of worker threads to time (1..threads)")
        .range(1, 256);
  });
  return set;
}

int main(int argc, char** argv) {
  Config cfg("bench_loader", "\nLoader samples/s (decode + letterbox + texture) at 1..N threads for 28x28 and 512x512.");
  register_device_options(cfg);  // accepted (bench/run.sh passes --device to every bench); decoding runs on the host
  bench_options().add_to(cfg);
  try {
    if (!cfg.parse(argc, argv)) return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_loader: error: %s\n", e.what());
    return 2;
  }
  const int max_threads = bench_options().read(cfg).threads;
  const std::string dir = (fs::temp_directory_path() / "vlm_bench_loader").string();
  fs::create_directories(dir);
  BuildOptions o;
  o.progress = false;
  std::string fm = dir + "/fmnist.h5", tux = dir + "/tux.h5";
  if (fs::exists("/usr/share/datasets/fashion-mnist")) {
    o.out = fm, o.limit = 4000;
    build_fashion_mnist("/usr/share/datasets/fashion-mnist", o);
  } else {
    synthetic(fm, 4000, 28);
  }
  if (fs::is_directory("/usr/share/tuxpaint/stamps")) {
    o.out = tux, o.limit = 80;
    build_tuxpaint("/usr/share/tuxpaint/stamps", o);
  } else {
    synthetic(tux, 80, 400);
  }
  std::printf("bench_loader: batch 16, decode + letterbox + texture per sample\n");
  stages("fashion-mnist", fm, 28, 7, 4000);
  stages("tuxpaint", tux, 512, 32, 80);
  for (int t = 1; t <= max_threads; ++t) run("fashion-mnist", fm, 28, 7, t, 150);
  for (int t = 1; t <= max_threads; ++t) run("tuxpaint", tux, 512, 32, t, 8);
  fs::remove_all(dir);
  return 0;
}

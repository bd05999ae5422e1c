// Loader throughput (issue 5): samples/s with decode + letterbox + 13-channel texture,
// at 1 and 2 worker threads, for working sizes 28x28 (Fashion-MNIST, raw storage) and
// 512x512 (Tux Paint stamps, PNG storage, G = 32). Prints figures; asserts nothing.
// Datasets are converted into the temp directory first (subsets: 4000 Fashion-MNIST
// images, 80 stamps); a source that is not installed is replaced by synthetic PNGs.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "data/converters.h"
#include "data/dataset_writer.h"
#include "data/loader.h"
#include "data/schema.h"

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

int main() {
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
  for (int t : {1, 2}) run("fashion-mnist", fm, 28, 7, t, 150);
  for (int t : {1, 2}) run("tuxpaint", tux, 512, 32, t, 8);
  fs::remove_all(dir);
  return 0;
}

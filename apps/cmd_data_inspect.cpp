// `vlm data inspect FILE.h5 [--data.samples K]`: counts, image sizes, caption lengths and
// samples of a dataset; reads every caption and prompt and decodes every image
// (data/storage/dataset_check.h): exit 2 when a text is not UTF-8 or an image fails.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "apps/command.h"
#include "apps/data_tool.h"
#include "base/error.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_check.h"

namespace vlm {

namespace {

int do_inspect(const Config& c) {
  const DataTool d = data_tool().read(c);
  const std::string path = file_or_option(c, d, &DataTool::input);
  const DatasetReader r(path);
  std::printf("%s: format vlm-image-text v%lld, storage %s, source '%s'\n", path.c_str(), (long long)r.version(),
              r.raw() ? "raw" : "encoded", r.source().c_str());
  std::printf("images %lld, captions %lld, splits train %zu / val %zu / test %zu (images)\n",
              (long long)r.num_images(), (long long)r.num_captions(), r.split("train").size(),
              r.split("val").size(), r.split("test").size());
  std::map<std::pair<int, int>, int64_t> sizes;
  int64_t bytes = 0;
  for (int64_t i = 0; i < r.num_images(); ++i) {
    const ImageInfo inf = r.image_info(i);
    sizes[{inf.height, inf.width}]++;
    bytes += r.image_bytes(i);
  }
  std::printf("image sizes (HxW: count), %zu distinct:", sizes.size());
  int shown = 0;
  for (const auto& [hw, n] : sizes)
    if (shown++ < 8) std::printf(" %dx%d:%lld", hw.first, hw.second, (long long)n);
  std::printf("%s\nimage bytes: %.1f MB (%.0f per image)\n", sizes.size() > 8 ? " ..." : "", bytes / 1e6,
              r.num_images() ? double(bytes) / double(r.num_images()) : 0.0);
  std::fflush(stdout);
  const DatasetCheck chk = [&] {
    QuietStderr quiet;  // libpng/libjpeg's own messages: the count below replaces them
    return check_dataset(r, int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  }();
  if (chk.captions > 0)
    std::printf("caption bytes: min %lld, mean %.1f, max %lld\n", (long long)chk.caption_bytes_min,
                double(chk.caption_bytes_sum) / double(chk.captions), (long long)chk.caption_bytes_max);
  std::printf("text: %lld captions and %lld prompts, all valid UTF-8\n", (long long)chk.captions,
              (long long)chk.prompts);
  if (r.raw())
    std::printf("images: all %lld raw images read (nothing to decode)\n", (long long)chk.images);
  else if (chk.bad_images == 0)
    std::printf("images: all %lld decode to their recorded size\n", (long long)chk.images);
  else
    std::printf("images: %lld of %lld cannot be used (first: %s)\n", (long long)chk.bad_images,
                (long long)chk.images, chk.first_reason.c_str());
  std::printf("tokens: %s\n", r.has_tokens() ? ("present (" + r.tokenizer_name() + ")").c_str() : "absent");
  if (r.has_boxes() || !r.caption_labels().empty())
    std::printf("caption boxes: %s, caption labels: %s (%zu classes)\n", r.has_boxes() ? "present" : "absent",
                r.caption_labels().empty() ? "absent" : "present", r.caption_class_names().size());
  const int64_t k = std::min<int64_t>(d.samples, r.num_captions());
  for (int64_t s = 0; s < k; ++s) {
    const int64_t j = s * r.num_captions() / std::max<int64_t>(k, 1);
    const ImageInfo inf = r.image_info(r.caption_image(j));
    std::printf("  [%lld] image %lld (%dx%dx%d): ", (long long)j, (long long)r.caption_image(j), inf.height,
                inf.width, inf.channels);
    if (!r.prompt(j).empty()) std::printf("\"%s\" -> ", r.prompt(j).c_str());
    std::printf("\"%s\"", r.caption(j).c_str());
    if (!r.labels().empty()) std::printf(" label %d", r.labels()[size_t(r.caption_image(j))]);
    if (r.has_boxes()) {
      const CaptionBox b = r.box(j);
      std::printf(" box [%d,%d,%d,%d)", b.x0, b.y0, b.x1, b.y1);
    }
    if (!r.caption_labels().empty()) {
      const int32_t l = r.caption_labels()[size_t(j)];
      const auto& names = r.caption_class_names();
      std::printf(" class %d%s%s", l, size_t(l) < names.size() ? " " : "",
                  size_t(l) < names.size() ? names[size_t(l)].c_str() : "");
    }
    if (r.has_tokens()) std::printf(" (%zu tokens)", r.tokens(j).size());
    std::printf("\n");
  }
  if (chk.bad_images > 0) {
    std::string idx;
    for (int64_t i : chk.first_bad) idx += (idx.empty() ? "" : ", ") + std::to_string(i);
    if (chk.bad_images > int64_t(chk.first_bad.size())) idx += ", ...";
    throw UserError(cat(path, ": ", chk.bad_images, " of ", chk.images, " images cannot be used (images ", idx,
                        "; first: ", chk.first_reason, "); rebuild the dataset: vlm data build writes only images "
                        "that decode, with their decoded size"));
  }
  return 0;
}

}  // namespace

VLM_COMMAND(data_inspect, {.path = "data inspect",
                           .summary = "print counts, sizes and samples of FILE; check every text and image",
                           .usage = kDataUsage,
                           .options = register_data_tool_options,
                           .run = do_inspect,
                           .positional = 1});

}  // namespace vlm

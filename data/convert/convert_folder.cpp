// Converters from a folder of images plus captions: JSONL and LLaVA-style JSON
// (formats in converters.h). Images are stored as their original file bytes.
#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.h"
#include "core/json.h"
#include "data/convert/converters.h"
#include "data/storage/dataset_writer.h"

namespace vlm {

namespace {
struct Entry {
  std::string image, caption, prompt;
};

std::string join_path(const std::string& root, const std::string& rel) {
  if (root.empty() || (!rel.empty() && rel[0] == '/')) return rel;
  return root.back() == '/' ? root + rel : root + "/" + rel;
}

// Writes entries (grouped by image path, first-seen order) and random splits.
BuildReport write_entries(const std::vector<Entry>& entries, const std::string& root,
                          const BuildOptions& opt, const std::string& source, int64_t pre_skipped) {
  BuildReport rep;
  rep.skipped = pre_skipped;
  DatasetWriter w = DatasetWriter::encoded(opt.out);
  w.set_source(source);
  std::map<std::string, int64_t> index;  // path -> image index, or -1 if skipped
  std::vector<std::pair<int64_t, const Entry*>> caps;
  int64_t distinct = 0;
  for (const Entry& e : entries)
    if (!index.count(e.image)) index[e.image] = -2, ++distinct;
  const int64_t total = opt.limit > 0 ? std::min(opt.limit, distinct) : distinct;
  int64_t done = 0;
  for (const Entry& e : entries) {
    int64_t& idx = index[e.image];
    if (idx == -2) {
      if (done >= total) continue;  // over the limit: not converted
      ++done;
      if (!add_encoded_file(w, join_path(root, e.image), &idx)) idx = -1, ++rep.skipped;
      build_progress(opt, "images", done, total);
    }
    if (idx >= 0) w.add_caption(idx, e.caption, e.prompt);
  }
  rep.images = w.num_images();
  rep.captions = w.num_captions();
  write_random_splits(w, rep.images, opt);
  w.finish();
  return rep;
}
}  // namespace

BuildReport build_from_jsonl(const std::string& jsonl, const std::string& image_root,
                             const BuildOptions& opt) {
  const std::string text = read_text_file(jsonl);
  std::vector<Entry> entries;
  size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view l(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = cat(jsonl, ":", line);
    const json::Value j = json::parse(l, where);
    const json::Value* im = j.find("image");
    VLM_REQUIRE(im && im->is_string(), where, ": missing string field \"image\"");
    const json::Value* pr = j.find("prompt");
    const std::string prompt = pr && pr->is_string() ? pr->as_string() : "";
    if (const json::Value* c = j.find("caption"); c && c->is_string()) {
      entries.push_back({im->as_string(), c->as_string(), prompt});
    } else if (const json::Value* cs = j.find("captions"); cs && cs->is_array()) {
      for (const json::Value& c2 : cs->as_array()) entries.push_back({im->as_string(), c2.as_string(), prompt});
    } else {
      throw UserError(cat(where, ": missing string field \"caption\" (or array \"captions\")"));
    }
  }
  return write_entries(entries, image_root, opt, "jsonl:" + jsonl, 0);
}

BuildReport build_from_llava(const std::string& path, const std::string& image_root,
                             const BuildOptions& opt) {
  json::Limits lim;
  lim.max_bytes = size_t(8) << 30;  // LLaVA instruction files reach hundreds of MB
  const json::Value root = json::parse_file(path, lim);  // size checked before reading
  VLM_REQUIRE(root.is_array(), path, ": a LLaVA file is a JSON array of conversations");
  std::vector<Entry> entries;
  int64_t no_image = 0;
  for (const json::Value& item : root.as_array()) {
    const json::Value* im = item.find("image");
    const json::Value* conv = item.find("conversations");
    if (!im || !im->is_string() || !conv || !conv->is_array()) {
      ++no_image;
      continue;
    }
    std::string prompt;
    for (const json::Value& turn : conv->as_array()) {
      const json::Value* from = turn.find("from");
      const json::Value* value = turn.find("value");
      if (!from || !value || !from->is_string() || !value->is_string()) continue;
      if (from->as_string() == "human") {
        prompt = value->as_string();
        for (size_t k; (k = prompt.find("<image>")) != std::string::npos;) prompt.erase(k, 7);
        const size_t b = prompt.find_first_not_of(" \n\r\t"), e = prompt.find_last_not_of(" \n\r\t");
        prompt = b == std::string::npos ? "" : prompt.substr(b, e - b + 1);
      } else if (from->as_string() == "gpt") {
        entries.push_back({im->as_string(), value->as_string(), prompt});
      }
    }
  }
  if (no_image > 0)
    std::fprintf(stderr, "[build] %s: %lld entries without an image skipped\n", path.c_str(),
                 (long long)no_image);
  return write_entries(entries, image_root, opt, "llava:" + path, no_image);
}

}  // namespace vlm

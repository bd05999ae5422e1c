// Converters from a folder of images plus captions: JSONL and LLaVA-style JSON
// (formats and policies in converters.h). Images are stored as their original file bytes.
#include <algorithm>
#include <cstdio>
#include <map>

#include "base/error.h"
#include "base/file_read.h"
#include "base/json.h"
#include "data/convert/converters.h"
#include "data/storage/dataset_writer.h"

namespace vlm {

namespace {

// Caption files reach a few GB (LLaVA instruction sets); base/file_read.h also checks
// that the bytes can be allocated.
constexpr uint64_t kMaxCaptionFileBytes = uint64_t(8) << 30;

struct Entry {
  std::string image, caption, prompt;
  std::string where;  // "file:line" or "file: entry k", for messages
};

// Writes entries (grouped by image path, first-seen order) and random splits.
BuildReport write_entries(const std::vector<Entry>& entries, const std::string& input, const std::string& root,
                          const BuildOptions& opt, const std::string& source, int64_t pre_skipped) {
  VLM_REQUIRE(!entries.empty(), input, ": no captioned images in the file; nothing written");
  BuildReport rep;
  rep.skipped = pre_skipped;
  DatasetWriter w = DatasetWriter::encoded(opt.out);
  w.set_source(source);
  w.set_tokenizer(opt.tokenizer_name);
  std::map<std::string, int64_t> index;  // resolved path -> image index, -1 if skipped
  std::vector<std::string> paths;        // resolved path of each entry
  int64_t distinct = 0;
  for (const Entry& e : entries) {
    // A caption with nothing to learn (BOS EOS alone) is a mistake of the file.
    VLM_REQUIRE(e.caption.find_first_not_of(" \t\r\n") != std::string::npos, e.where,
                ": the caption is empty (a sample needs words to learn)");
    paths.push_back(image_path(root, e.image, e.where, opt));  // every path checked before any is read
    if (!index.count(paths.back())) index[paths.back()] = -2, ++distinct;
  }
  const int64_t total = opt.limit > 0 ? std::min(opt.limit, distinct) : distinct;
  int64_t done = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    int64_t& idx = index[paths[k]];
    if (idx == -2) {
      if (done >= total) continue;  // over the limit: not converted
      ++done;
      if (!add_encoded_file(w, paths[k], &idx)) idx = -1, ++rep.skipped, ++rep.bad;
      build_progress(opt, "images", done, total);
    }
    if (idx >= 0) add_caption_checked(w, idx, e.caption, e.prompt, e.where, opt);
  }
  require_usable_images(input, done, rep.bad, opt);
  rep.images = w.num_images();
  rep.captions = w.num_captions();
  write_random_splits(w, rep.images, opt);
  w.finish();
  return rep;
}

// A string member of a JSON object: nullptr when absent; UserError when not a string.
const std::string* string_field(const json::Value& obj, const char* key, const std::string& where) {
  const json::Value* v = obj.find(key);
  return v && !v->is_null() ? &v->as_string(cat(where, ": \"", key, "\"")) : nullptr;
}

}  // namespace

BuildReport build_from_jsonl(const std::string& jsonl, const std::string& image_root,
                             const BuildOptions& opt) {
  const std::string text = read_file_bounded(jsonl, kMaxCaptionFileBytes, "JSONL file");
  std::vector<Entry> entries;
  size_t pos = 0;
  int64_t line = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view l(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = cat(jsonl, ":", line);
    const json::Value j = json::parse(l, where);
    VLM_REQUIRE(j.is_object(), where, ": expected a JSON object, got a ", json::type_name(j.type()));
    const std::string* im = string_field(j, "image", where);
    VLM_REQUIRE(im, where, ": missing string field \"image\"");
    const std::string* pr = string_field(j, "prompt", where);
    const std::string prompt = pr ? *pr : "";
    if (const std::string* c = string_field(j, "caption", where)) {
      entries.push_back({*im, *c, prompt, where});
    } else if (const json::Value* cs = j.find("captions"); cs && cs->is_array()) {
      size_t k = 0;
      for (const json::Value& c2 : cs->as_array())
        entries.push_back({*im, c2.as_string(cat(where, ": \"captions\"[", k++, "]")), prompt, where});
    } else {
      throw UserError(cat(where, ": missing string field \"caption\" (or array \"captions\")"));
    }
  }
  return write_entries(entries, jsonl, image_root, opt, "jsonl:" + jsonl, 0);
}

BuildReport build_from_llava(const std::string& path, const std::string& image_root,
                             const BuildOptions& opt) {
  json::Limits lim;
  lim.max_bytes = size_t(kMaxCaptionFileBytes);
  const json::Value root = json::parse_file(path, lim);  // size checked before reading
  VLM_REQUIRE(root.is_array(), path, ": a LLaVA file is a JSON array of conversations");
  std::vector<Entry> entries;
  int64_t no_image = 0, system = 0, k = 0;
  for (const json::Value& item : root.as_array()) {
    const std::string where = cat(path, ": entry ", k++);
    VLM_REQUIRE(item.is_object(), where, ": expected a JSON object (a conversation), got a ",
                json::type_name(item.type()));
    const std::string* im = string_field(item, "image", where);
    if (!im) {
      ++no_image;  // text-only conversations are common in LLaVA mixtures: not an error
      continue;
    }
    const json::Value* conv = item.find("conversations");
    VLM_REQUIRE(conv && conv->is_array(), where, ": expected an array \"conversations\"");
    std::string prompt;
    size_t t = 0;
    for (const json::Value& turn : conv->as_array()) {
      const std::string at = cat(where, ": \"conversations\"[", t++, "]");
      VLM_REQUIRE(turn.is_object(), at, ": expected an object {\"from\", \"value\"}");
      const std::string* from = string_field(turn, "from", at);
      const std::string* value = string_field(turn, "value", at);
      VLM_REQUIRE(from && value, at, ": missing string field \"", from ? "value" : "from", "\"");
      if (*from == "human") {
        prompt = *value;
        for (size_t p; (p = prompt.find("<image>")) != std::string::npos;) prompt.erase(p, 7);
        const size_t b = prompt.find_first_not_of(" \n\r\t"), e = prompt.find_last_not_of(" \n\r\t");
        prompt = b == std::string::npos ? "" : prompt.substr(b, e - b + 1);
      } else if (*from == "gpt") {
        entries.push_back({*im, *value, prompt, where});
      } else {
        VLM_REQUIRE(*from == "system", at, ": \"from\" is '", *from, "' (expected human, gpt or system)");
        ++system;
      }
    }
  }
  if (system > 0)
    std::printf("[build] %s: %lld system turns skipped (they are not captions or prompts)\n", path.c_str(),
                (long long)system);
  if (no_image > 0)
    std::printf("[build] %s: %lld entries without an image skipped\n", path.c_str(),
                 (long long)no_image);
  return write_entries(entries, path, image_root, opt, "llava:" + path, no_image);
}

}  // namespace vlm

// Tokenizer <-> Hugging Face tokenizer.json (BPE, byte-level): load and save.
// Loading reads model.vocab, model.merges ("a b" strings or [a, b] pairs) and
// added_tokens; the pre-tokeniser is Qwen2-style when a Split regex with
// "[^\r\n\p{L}\p{N}]?\p{L}+" is present (digit groups of 3 when "\p{N}{1,3}" appears,
// as in Llama-3), GPT-2 style otherwise. ByteLevel add_prefix_space is ignored (GPT-2
// and Qwen2 set it false). Missing bos/eos/pad/image tokens are appended (tokenizer.h).
// Loading is bounded (file size, id range, dense ids checked before the tables are
// allocated); every error names the file and the entry. Saving goes through an
// AtomicFile (io/atomic_file.h).
#include <algorithm>
#include <functional>
#include <sstream>

#include "base/error.h"
#include "base/file_read.h"
#include "base/json.h"
#include "data/text/tokenizer.h"
#include "io/atomic_file.h"

namespace vlm {

static std::string json_quote(std::string_view s) {
  std::string out;
  json::write_string(out, s);
  return out;
}

static const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Calls f on every object anywhere under j (a pre_tokenizer, its sequence's members and
// their patterns).
static void each_object(const json::Value& j, const std::function<void(const json::Value&)>& f) {
  if (j.is_object()) {
    f(j);
    for (const auto& m : j.as_object()) each_object(m.second, f);
  } else if (j.is_array()) {
    for (const auto& x : j.as_array()) each_object(x, f);
  }
}

// The settings of a tokenizer.json that change how text encodes and that this tokenizer
// does not implement are refused, not ignored: BPE dropout, byte fallback, subword
// affixes, a normalizer other than NFC (Qwen2's; the text is taken as given, which NFC
// leaves unchanged when it is already in NFC), a pre-tokenizer other than ByteLevel or
// a Split + ByteLevel sequence (GPT-2's, Qwen2's). Absent or null settings are the
// defaults.
static void check_supported_settings(const json::Value& root, const json::Value& model, const std::string& where) {
  const auto set = [&](const json::Value& obj, const char* key) {
    const json::Value* v = obj.find(key);
    return v && !v->is_null() ? v : nullptr;
  };
  if (const json::Value* d = set(model, "dropout"))
    VLM_REQUIRE(d->is_number() && d->as_double() == 0, where, ": model.dropout (BPE dropout) is not supported");
  if (const json::Value* b = set(model, "byte_fallback"))
    VLM_REQUIRE(b->is_bool() && !b->as_bool(), where, ": model.byte_fallback is not supported (byte-level BPE only)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json::Value* a = set(model, key))
      VLM_REQUIRE(a->is_string() && a->as_string().empty(), where, ": model.", key, " is not supported");
  if (const json::Value* n = set(root, "normalizer")) {
    const json::Value* t = n->find("type");
    const std::string type = t && t->is_string() ? t->as_string() : "?";
    VLM_REQUIRE(type == "NFC", where, ": normalizer '", type, "' is not supported (null or NFC)");
  }
  if (const json::Value* pt = set(root, "pre_tokenizer")) {
    std::vector<std::string> types;
    each_object(*pt, [&](const json::Value& o) {
      if (const json::Value* t = o.find("type"); t && t->is_string()) types.push_back(t->as_string());
    });
    VLM_REQUIRE(!types.empty(), where, ": pre_tokenizer without a type");
    for (const std::string& t : types)
      VLM_REQUIRE(t == "ByteLevel" || t == "Sequence" || t == "Split", where, ": pre_tokenizer '", t,
                  "' is not supported (ByteLevel, or a Split and ByteLevel sequence)");
  }
}


// Large HF vocabularies are ~10-20 MB; ids are dense and below 2^24.
constexpr size_t kMaxTokenizerBytes = size_t(256) << 20;
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

Tokenizer Tokenizer::load(const std::string& path) {
  return from_json(read_file_bounded(path, kMaxTokenizerBytes, "tokenizer file"), path);
}

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& where) {
  json::Limits lim;
  lim.max_bytes = kMaxTokenizerBytes;
  const json::Value root = json::parse(text, where, lim);
  VLM_REQUIRE(root.is_object(), where, ": expected a JSON object (a tokenizer.json), got a ",
              json::type_name(root.type()));
  const json::Value* model = root.find("model");
  VLM_REQUIRE(model && model->is_object(), where, ": no 'model' object (not a tokenizer.json?)");
  const json::Value* type = model->find("type");
  VLM_REQUIRE(!type || (type->is_string() && type->as_string() == "BPE"), where,
              ": model.type must be BPE (only byte-level BPE is supported)");
  check_supported_settings(root, *model, where);
  const json::Value* vocab = model->find("vocab");
  const json::Value* merges = model->find("merges");
  VLM_REQUIRE(vocab && vocab->is_object() && merges && merges->is_array(), where,
              ": model.vocab (object) and model.merges (array) are required");

  // Ids may come in any order; build id -> bytes first.
  std::vector<std::pair<int64_t, std::string>> entries;
  int64_t max_id = -1;
  for (const auto& [tok, idj] : vocab->as_object()) {
    const int64_t id = json::int_in(idj, 0, kMaxTokenId, cat(where, ": model.vocab[", json_quote(tok), "]"));
    std::string bytes;
    VLM_REQUIRE(unicode_to_byte(tok, &bytes), where, ": vocab entry '", tok,
                "' is not byte-level (GPT-2 byte-to-unicode) text");
    entries.emplace_back(id, std::move(bytes));
    max_id = std::max(max_id, id);
  }
  std::vector<std::pair<int64_t, std::string>> added;
  std::vector<bool> added_special;
  if (const json::Value* at = root.find("added_tokens"); at && !at->is_null()) {
    size_t k = 0;
    for (const json::Value& a : at->as_array(cat(where, ": added_tokens"))) {
      const std::string w = cat(where, ": added_tokens[", k++, "]");
      const json::Value* id = a.find("id");
      const json::Value* content = a.find("content");
      VLM_REQUIRE(id && content, w, ": needs \"id\" and \"content\"");
      const std::string& text = content->as_string(cat(w, ".content"));
      VLM_REQUIRE(!text.empty(), w, ".content: an added token cannot be empty");
      added.emplace_back(json::int_in(*id, 0, kMaxTokenId, cat(w, ".id")), text);
      const json::Value* sp = a.find("special");
      added_special.push_back(sp && sp->is_bool() ? sp->as_bool() : true);
      max_id = std::max(max_id, added.back().first);
    }
  }
  // Dense ids: the largest id is below the number of entries (checked before the
  // tables of max_id + 1 slots are allocated).
  VLM_REQUIRE(max_id < int64_t(entries.size() + added.size()), where, ": token id ", max_id, " but only ",
              entries.size() + added.size(), " tokens (ids must be dense, 0..N-1)");

  Tokenizer t;
  t.tokens_.assign(size_t(max_id + 1), std::string());
  t.special_.assign(size_t(max_id + 1), false);
  t.added_.assign(size_t(max_id + 1), false);
  t.normal_ids_.clear();
  t.added_list_.clear();
  std::vector<bool> seen(size_t(max_id + 1), false);
  for (auto& [id, bytes] : entries) {
    VLM_REQUIRE(!seen[size_t(id)], where, ": vocab id ", id, " appears twice");
    seen[size_t(id)] = true;
    t.tokens_[size_t(id)] = bytes;
    t.normal_ids_.emplace(bytes, int(id));
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const auto& [id, content] = added[k];
    if (seen[size_t(id)] && t.tokens_[size_t(id)] != content) {
      // An added token may duplicate a vocab entry with the same id; otherwise conflict.
      std::string bytes;
      VLM_REQUIRE(unicode_to_byte(content, &bytes) && bytes == t.tokens_[size_t(id)], where,
                  ": added token id ", id, " conflicts with the vocabulary");
    }
    if (seen[size_t(id)]) t.normal_ids_.erase(t.tokens_[size_t(id)]);
    seen[size_t(id)] = true;
    t.tokens_[size_t(id)] = content;
    t.special_[size_t(id)] = added_special[k];
    t.added_[size_t(id)] = true;
    t.added_list_.emplace_back(content, int(id));
  }
  std::stable_sort(t.added_list_.begin(), t.added_list_.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  for (int64_t id = 0; id <= max_id; ++id)
    VLM_REQUIRE(seen[size_t(id)], where, ": token id ", id, " is missing (ids must be dense)");
  for (int b = 0; b < 256; ++b) {
    const auto it = t.normal_ids_.find(std::string(1, char(b)));
    VLM_REQUIRE(it != t.normal_ids_.end(), where, ": byte ", b,
                " has no token (not a byte-level BPE vocabulary)");
    t.byte_id_[b] = it->second;
  }
  t.merges_.clear();
  t.merge_list_.clear();
  for (const json::Value& m : merges->as_array()) {
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.as_string();
      const size_t sp = s.find(' ');
      VLM_REQUIRE(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, where,
                  ": merge '", s, "' is not 'a b'");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else {
      VLM_REQUIRE(m.is_array() && m.as_array().size() == 2, where, ": merge entries are 'a b' or [a, b]");
      a = m.as_array()[0].as_string(cat(where, ": model.merges entry")),
      b = m.as_array()[1].as_string(cat(where, ": model.merges entry"));
    }
    std::string ba, bb;
    VLM_REQUIRE(unicode_to_byte(a, &ba) && unicode_to_byte(b, &bb), where, ": merge '", a, " ", b,
                "' is not byte-level text");
    const auto ia = t.normal_ids_.find(ba), ib = t.normal_ids_.find(bb), ir = t.normal_ids_.find(ba + bb);
    VLM_REQUIRE(ia != t.normal_ids_.end() && ib != t.normal_ids_.end() && ir != t.normal_ids_.end(),
                where, ": merge '", a, " ", b, "' uses or makes a token not in the vocabulary");
    t.add_merge(ia->second, ib->second);
  }
  std::vector<std::string> regexes;
  if (const json::Value* pt = root.find("pre_tokenizer"))
    each_object(*pt, [&](const json::Value& o) {  // every Split regex
      if (const json::Value* p = o.find("pattern"))
        if (const json::Value* r = p->find("Regex"); r && r->is_string()) regexes.push_back(r->as_string());
    });
  for (const std::string& r : regexes)
    if (r.find(R"([^\r\n\p{L}\p{N}]?\p{L}+)") != std::string::npos) {
      t.mode_ = PreTokenizer::Qwen2;
      t.max_digits_ = r.find(R"(\p{N}{1,3})") != std::string::npos ? 3 : 1;
    }
  t.ensure_specials();
  return t;
}

std::string Tokenizer::to_json() const {
  std::ostringstream o;
  o << "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  bool first = true;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!added_[id]) continue;
    o << (first ? "\n" : ",\n") << "    {\"id\": " << id << ", \"content\": " << json_quote(tokens_[id])
      << ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
         "\"special\": "
      << (special_[id] ? "true" : "false") << "}";
    first = false;
  }
  o << "\n  ],\n  \"normalizer\": null,\n  \"pre_tokenizer\": ";
  if (mode_ == PreTokenizer::Gpt2) {
    o << R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  } else {
    std::string re = kQwen2Regex;
    if (max_digits_ == 3) re.replace(re.find(R"(\p{N})"), 5, R"(\p{N}{1,3})");
    o << R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )"
      << json_quote(re)
      << R"(}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
  }
  o << ",\n  \"post_processor\": null,\n"
    << R"(  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},)"
    << "\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
       "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
       "\"byte_fallback\": false,\n    \"vocab\": {";
  first = true;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (added_[id]) continue;
    o << (first ? "\n      " : ",\n      ") << json_quote(byte_to_unicode(tokens_[id])) << ": " << id;
    first = false;
  }
  o << "\n    },\n    \"merges\": [";
  for (size_t k = 0; k < merge_list_.size(); ++k)
    o << (k ? ",\n      " : "\n      ")
      << json_quote(byte_to_unicode(tokens_[size_t(merge_list_[k].first)]) + " " +
                    byte_to_unicode(tokens_[size_t(merge_list_[k].second)]));
  o << "\n    ]\n  }\n}\n";
  return o.str();
}

void Tokenizer::save(const std::string& path) const { write_file_atomic(path, to_json()); }

}  // namespace vlm

// tokenize_captions(): writes the token datasets of an existing schema-v1 file
// (converters.h). The captions are read through DatasetReader (validated, UTF-8 checked,
// the prompts too), encoded, and written by rewrite_caption_tokens (dataset_writer.h),
// which replaces earlier tokens.
#include "base/error.h"
#include "data/convert/converters.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "data/storage/schema.h"
#include "data/text/tokenizer.h"

namespace vlm {

void tokenize_captions(const std::string& h5, const Tokenizer& tok, const std::string& name) {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets{0};
  {
    DatasetReader r(h5);
    for (int64_t j = 0; j < r.num_captions(); ++j) {
      r.prompt(j);  // checked (UTF-8) like the caption: the loader tokenises it later
      const std::vector<int32_t> t = tok.encode(r.caption(j), true, true);
      VLM_REQUIRE(int64_t(t.size()) <= schema::kMaxCaptionTokens, h5, ": caption ", j, " has ", t.size(),
                  " tokens (limit ", schema::kMaxCaptionTokens, ")");
      tokens.insert(tokens.end(), t.begin(), t.end());
      offsets.push_back(int64_t(tokens.size()));
    }
  }
  rewrite_caption_tokens(h5, tokens, offsets, name);
}

}  // namespace vlm

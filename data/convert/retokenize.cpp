// tokenize_captions(): writes the token datasets of an existing schema-v1 file
// (converters.h). The captions are read through DatasetReader (validated), then the
// file is reopened read-write and the old token datasets, if any, are unlinked.
#include "core/error.h"
#include "data/converters.h"
#include "data/dataset.h"
#include "data/schema.h"
#include "data/tokenizer.h"

namespace vlm {

void tokenize_captions(const std::string& h5, const Tokenizer& tok, const std::string& name) {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets{0};
  {
    DatasetReader r(h5);
    for (int64_t j = 0; j < r.num_captions(); ++j) {
      const std::vector<int32_t> t = tok.encode(r.caption(j), true, true);
      VLM_REQUIRE(int64_t(t.size()) <= schema::kMaxCaptionTokens, h5, ": caption ", j, " has ", t.size(),
                  " tokens (limit ", schema::kMaxCaptionTokens, ")");
      tokens.insert(tokens.end(), t.begin(), t.end());
      offsets.push_back(int64_t(tokens.size()));
    }
  }
  H5Lock lock(h5_mutex());
  const hid_t f = H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  VLM_REQUIRE(f >= 0, h5, ": cannot open for writing");
  H5Id file(f);
  H5Id g(H5_CHECK(H5Gopen2(file, "captions", H5P_DEFAULT)));
  for (const char* ds : {"tokens", "token_offsets"})
    if (H5Lexists(g, ds, H5P_DEFAULT) > 0) H5_CHECK(H5Ldelete(g, ds, H5P_DEFAULT));
  if (H5Aexists(g, schema::kAttrTokenizer) > 0) H5_CHECK(H5Adelete(g, schema::kAttrTokenizer));
  h5_write_1d(g, "tokens", H5Elem::I32, tokens.data(), int64_t(tokens.size()), true);
  h5_write_1d(g, "token_offsets", H5Elem::I64, offsets.data(), int64_t(offsets.size()), true);
  h5_write_attr_string(g, schema::kAttrTokenizer, name);
}

}  // namespace vlm

// Fuzz target: opening an image-text HDF5 dataset (data/storage/dataset.h) and reading
// from it. Structure-aware: the input is a program of edits applied with the HDF5 C API
// to a valid dataset (encoded or raw storage, built at start-up by DatasetWriter from the
// SigLIP fixture image), so the files stay well-formed HDF5 and the fuzzer explores our
// checks: datasets replaced by other dtypes, ranks, sizes, values, layouts (chunked,
// deflate, never written, huge extents), groups or soft links, attributes replaced by
// other types and shapes, items deleted. The edited file is then opened and its first
// images, captions, prompts, tokens and splits are read.
// (Bytes of the HDF5 format itself are libhdf5's to parse; this target does not mutate them.)
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <iterator>
#include <vector>

#include "data/image/image_pipeline.h"
#include "data/storage/dataset.h"
#include "data/storage/dataset_writer.h"
#include "fuzz_util.h"

using namespace vlm;

namespace {

std::string g_base[2];  // bytes of the encoded and the raw base file

const char* const kDatasets[] = {
    "/images/encoded", "/images/offsets",       "/images/raw",   "/images/height",         "/images/width",
    "/images/channels", "/images/label",        "/captions/text", "/captions/text_offsets", "/captions/image",
    "/captions/prompt", "/captions/prompt_offsets", "/captions/tokens", "/captions/token_offsets",
    "/splits/train",    "/splits/val",          "/splits/test",  "/images",                "/captions"};
const char* const kAttrs[][2] = {{"/", "format"},  {"/", "version"},        {"/", "image_storage"},
                                 {"/", "source"},  {"/images", "class_names"}, {"/captions", "tokenizer"}};

std::string build_base(bool raw) {
  const std::string png = fuzz::read_bytes(std::string(VLM_SOURCE_DIR) + "/tests/data/hf_tiny/siglip/image.png");
  const RgbImage m = decode_rgb(reinterpret_cast<const uint8_t*>(png.data()), png.size());
  const std::string path = fuzz::scratch(raw ? "base_raw.h5" : "base.h5");
  {
    DatasetWriter w = raw ? DatasetWriter::raw(path, 4, 4, 3) : DatasetWriter::encoded(path);
    const std::vector<int32_t> toks[3] = {{1, 5, 2}, {1, 6, 7, 2}, {1, 2}};
    for (int i = 0; i < 3; ++i) {
      std::vector<uint8_t> px(48, uint8_t(40 * i));
      const int64_t idx = raw ? w.add_raw(px.data())
                              : w.add_encoded(reinterpret_cast<const uint8_t*>(png.data()), png.size(), m.height,
                                              m.width, 3);
      w.add_caption(idx, "caption " + std::to_string(i), i == 1 ? "a prompt" : "", &toks[i]);
    }
    w.set_labels({0, 1, 1}, {"zero", "one"});
    w.set_tokenizer("tok.json");
    w.set_split("/splits/train", {0, 1});
    w.set_split("/splits/val", {2});
    w.set_split("/splits/test", {});
    w.finish();
  }
  return fuzz::read_bytes(path);
}

hid_t pick_type(FuzzedDataProvider& p) {
  const hid_t types[] = {H5T_STD_U8LE, H5T_STD_I32LE, H5T_STD_I64LE, H5T_STD_U64LE,
                         H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I16BE, H5T_STD_U32LE};
  return p.PickValueInArray(types);
}

void unlink(hid_t f, const char* name) {
  if (H5Lexists(f, name, H5P_DEFAULT) > 0) H5Ldelete(f, name, H5P_DEFAULT);
}

// A dataset `name` of a picked type and rank with small dims (values from the input), or
// with a huge declared extent and nothing written, chunked and maybe deflated.
void replace_dataset(hid_t f, const char* name, FuzzedDataProvider& p) {
  unlink(f, name);
  const hid_t type = pick_type(p);
  const int rank = p.ConsumeIntegralInRange(0, 4);
  const bool huge = p.ConsumeProbability<float>() < 0.1f;
  std::vector<hsize_t> dims(size_t(std::max(rank, 1)), 1);
  hsize_t n = 1;
  for (int i = 0; i < rank; ++i) {
    dims[size_t(i)] = huge && i == 0 ? hsize_t(1) << p.ConsumeIntegralInRange(20, 45) : p.ConsumeIntegralInRange(0, 8);
    n *= dims[size_t(i)];
  }
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (rank > 0 && (huge || p.ConsumeBool())) {
    std::vector<hsize_t> chunk(size_t(rank), 1);
    chunk[0] = std::min<hsize_t>(std::max<hsize_t>(dims[0], 1), 64);
    H5Pset_chunk(dcpl, rank, chunk.data());
    if (p.ConsumeBool()) H5Pset_deflate(dcpl, 1);
  }
  const hid_t d = H5Dcreate2(f, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (d >= 0 && !huge && n > 0 && p.ConsumeBool()) {
    std::vector<uint8_t> bytes = p.ConsumeBytes<uint8_t>(size_t(n) * H5Tget_size(type));
    bytes.resize(size_t(n) * H5Tget_size(type), 0);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  }
  if (d >= 0) H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void replace_attr(hid_t f, FuzzedDataProvider& p) {
  const auto& attr = kAttrs[p.ConsumeIntegralInRange<size_t>(0, std::size(kAttrs) - 1)];
  const char* obj_name = attr[0];
  const char* name = attr[1];
  const hid_t obj = H5Oopen(f, obj_name, H5P_DEFAULT);
  if (obj < 0) return;
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  const int kind = p.ConsumeIntegralInRange(0, 6);
  const hsize_t n = p.ConsumeIntegralInRange<hsize_t>(1, 4);
  const hid_t space = kind == 6 ? H5Screate(H5S_NULL) : p.ConsumeBool() ? H5Screate(H5S_SCALAR)
                                                                       : H5Screate_simple(1, &n, nullptr);
  const hssize_t count = std::max<hssize_t>(H5Sget_simple_extent_npoints(space), 1);
  if (kind <= 1) {  // variable-length or fixed-length string(s)
    std::vector<std::string> text;
    for (hssize_t k = 0; k < count; ++k)
      text.push_back(p.ConsumeBool() ? std::string(name == std::string("format") ? "vlm-image-text" : "encoded")
                                     : p.ConsumeRandomLengthString(64));
    const hid_t t = H5Tcopy(H5T_C_S1);
    if (kind == 0) {
      H5Tset_size(t, H5T_VARIABLE);
      std::vector<const char*> ptr;
      for (const auto& s : text) ptr.push_back(s.c_str());
      const hid_t a = H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) H5Awrite(a, t, ptr.data()), H5Aclose(a);
    } else {
      const size_t width = p.ConsumeIntegralInRange<size_t>(1, 24);
      H5Tset_size(t, width);
      std::string buf(size_t(count) * width, '\0');
      for (size_t k = 0; k < text.size(); ++k) buf.replace(k * width, std::min(width, text[k].size()), text[k], 0, width);
      const hid_t a = H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
      if (a >= 0) H5Awrite(a, t, buf.data()), H5Aclose(a);
    }
    H5Tclose(t);
  } else {  // numbers of a picked type (kind 6: no value at all)
    const hid_t type = pick_type(p);
    std::vector<uint8_t> bytes = p.ConsumeBytes<uint8_t>(size_t(count) * H5Tget_size(type));
    bytes.resize(size_t(count) * H5Tget_size(type), 0);
    if (kind == 2 && !bytes.empty()) bytes.assign(bytes.size(), 0), bytes[0] = 1;  // version 1 in most types
    const hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
      if (kind != 6) H5Awrite(a, type, bytes.data());
      H5Aclose(a);
    }
  }
  H5Sclose(space);
  H5Oclose(obj);
}

void edit(const std::string& path, FuzzedDataProvider& p) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return;
  for (int ops = 0; ops < 8 && p.remaining_bytes() > 0; ++ops) {
    const char* name = p.PickValueInArray(kDatasets);
    switch (p.ConsumeIntegralInRange(0, 5)) {
      case 0: unlink(f, name); break;
      case 1:
      case 2: replace_dataset(f, name, p); break;
      case 3: replace_attr(f, p); break;
      case 4:
        unlink(f, name);
        H5Lcreate_soft(p.PickValueInArray(kDatasets), f, name, H5P_DEFAULT, H5P_DEFAULT);
        break;
      default:
        unlink(f, name);
        if (const hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); g >= 0) H5Gclose(g);
    }
  }
  H5Fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  g_base[0] = build_base(false);
  g_base[1] = build_base(true);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  const std::string path = fuzz::scratch("ds.h5");
  const std::string& base = g_base[p.ConsumeBool() ? 1 : 0];
  fuzz::write_bytes(path, base.data(), base.size());
  edit(path, p);
  fuzz::refusal_allowed([&] {
    const DatasetReader r(path);
    std::vector<uint8_t> buf;
    for (int64_t i = 0; i < std::min<int64_t>(r.num_images(), 3); ++i) r.image_data(i, buf), (void)r.image_info(i);
    for (int64_t j = 0; j < std::min<int64_t>(r.num_captions(), 3); ++j) {
      (void)r.caption(j), (void)r.prompt(j);
      if (r.has_tokens()) (void)r.tokens(j);
    }
    for (const char* s : {"train", "val", "test", "all"}) (void)r.split_captions(s);
  });
  return 0;
}

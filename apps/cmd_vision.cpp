// `vlm vision features`: runs the vision encoder (vision/encoder.h) on one image and
// writes its cell features, to check an import against another implementation or to
// look at what the encoder sees.
//   vlm vision features --vision.hf DIR --image FILE --out F.h5 [--device ...]
//   vlm vision features --config enc.cfg --image FILE --out F.h5 [--seed N]
// With vision.hf the encoder is the Hugging Face SigLIP tower of DIR (shape from its
// config.json, weights from its safetensors; vision/siglip_import.h) and the features
// are what the checkpoint's full model consumes (LLaVA: its vision_feature_layer);
// without it, an encoder of the vision.* options initialised from --seed.
// The image is decoded and letterboxed to S x S (copied as is when already S x S, so
// no resampling), its texture array computed on the G x G grid (data/image/texture.h),
// then one forward pass. The file (HDF5, written under a temporary name and renamed
// when complete) holds:
//   /features  f32 [G*G, d_v]   cells row-major
//   /texture   f32 [13, G, G]   the texture array (added through the zero-initialised
//                               map when vision.texture=on)
//   attrs on /: format = "vlm-vision-features", vision (the VisionConfig line), image,
//   readout (blocks run, post_norm), device.
// Inputs (options, image, checkpoint and its tensors) are checked on every rank in
// agreed steps before the forward pass (parallel/runtime.h); rank 0 writes the file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/error.h"
#include "base/options.h"
#include "core/device_options.h"
#include "core/out_of_memory.h"
#include "data/image/image_pipeline.h"
#include "data/image/texture.h"
#include "io/atomic_file.h"
#include "io/h5_io.h"
#include "parallel/runtime.h"
#include "vision/encoder.h"
#include "vision/siglip_import.h"

namespace vlm {

namespace {


// The decoded image letterboxed to S x S (packed RGB).
std::vector<uint8_t> load_image(const std::string& path, int S) {
  const RgbImage rgb = read_rgb_file(path, "--image");
  std::vector<uint8_t> sq(size_t(S) * size_t(S) * 3);
  letterbox_into(rgb.view(), S, 0, sq.data());
  return sq;
}

struct FeaturesInputs {
  std::string image, out;
};

const OptionSet<FeaturesInputs>& features_inputs() {
  static const OptionSet<FeaturesInputs> set([](OptionSet<FeaturesInputs>& s) {
    s.option("image", &FeaturesInputs::image, "input image (PNG, JPEG, ...), letterboxed to vision.image_size");
    s.option("out", &FeaturesInputs::out, "output HDF5 file (features [G*G, d_v] f32, texture [13, G, G])");
  });
  return set;
}

void vision_features_options(Config& cfg) {
  register_vision_options(cfg);
  features_inputs().add_to(cfg);
  register_runtime_options(cfg);
}

int vision_features(const Config& cfg) {
  Runtime rt = start_runtime(cfg);
  const FeaturesInputs in = features_inputs().read(cfg);
  const std::string &image = in.image, &out = in.out;
  VisionConfig v;
  SiglipCheckpoint ck;
  VisionReadout readout;
  std::vector<uint8_t> pixels;
  rt.on_every_rank("inputs", [&] {
    VLM_REQUIRE(!image.empty(), "--image: an image file is required");
    VLM_REQUIRE(!out.empty(), "--out: an output .h5 file is required");
    v = resolve_vision_config(cfg);
    check_output_path(out, cfg, {{"--image", image}, {"--vision.hf", v.hf_dir}});
    if (!v.hf_dir.empty()) {
      ck = read_siglip_config(v.hf_dir);
      readout = siglip_readout(ck);
    }
    pixels = load_image(image, v.image_size);
  });
  const int S = v.image_size, G = v.grid();
  Backend& b = rt.backend();
  const std::unique_ptr<Communicator> self =
      make_communicator(b.device(), MPI_COMM_SELF, "vision", rt.options().parallel.timeout_s);
  std::unique_ptr<VisionEncoder> enc;
  // An encoder too large for the device is named by the options that size it.
  const auto too_large = [&](const OutOfMemory& e) {
    return UserError(cat("--vision.image_size ", S, " with --vision.patch ", v.patch, " and --vision.d_model ",
                         v.d_model, ": the encoder for ", v.tokens(), " patches does not fit (", e.what(), ")"));
  };
  rt.on_every_rank("weights", [&] {
    try {
      enc = std::make_unique<VisionEncoder>(v, b, *self, 1, readout);
    } catch (const OutOfMemory& e) {
      throw too_large(e);
    }
    if (v.hf_dir.empty())
      enc->init(read_device_options(cfg).seed);
    else
      load_siglip(*enc, ck);
  });

  const std::vector<float> texture = compute_texture(ImageView::packed(pixels.data(), S, S), G);
  Tensor px = Tensor::empty(cpu_backend(), Shape{1, S, S, 3}, DType::U8);
  std::copy(pixels.begin(), pixels.end(), px.ptr<uint8_t>());
  const Tensor tex = Tensor::from_vector(texture, Shape{1, kTextureChannels, G, G});
  Stream& s = b.default_stream();
  try {
    enc->forward(s, to_backend(b, px), v.texture ? to_backend(b, tex) : Tensor{});
  } catch (const OutOfMemory& e) {
    throw too_large(e);
  }
  const std::vector<float> features = to_vector_f32(enc->features());  // synchronises
  if (rt.root()) {
    const std::string ro = cat("blocks=", enc->blocks(), " post_norm=", enc->post_norm() ? 1 : 0);
    h5_write_file_atomic(out, [&](H5Handle f) {
      h5_write_array(f, "features", H5Elem::F32, features.data(), {v.tokens(), v.d_model});
      h5_write_array(f, "texture", H5Elem::F32, texture.data(), {kTextureChannels, G, G});
      h5_write_attr_string(f, "format", "vlm-vision-features");
      h5_write_attr_string(f, "vision", v.str());
      h5_write_attr_string(f, "image", image);
      h5_write_attr_string(f, "readout", ro);
      h5_write_attr_string(f, "device", b.description());
    });
    std::printf("vlm vision features: %s (%s, %s) -> %s: features [%lld, %lld], texture [13, %d, %d]\n",
                image.c_str(), v.str().c_str(), ro.c_str(), out.c_str(), (long long)v.tokens(),
                (long long)v.d_model, G, G);
  }
  return 0;
}

}  // namespace

VLM_COMMAND(vision, {.path = "vision", .summary = "vision encoder tools: `vision features` (one image's features)"});
VLM_COMMAND(vision_features,
            {.path = "vision features",
             .summary = "write the vision encoder's features and texture array of one image",
             .usage = "--vision.hf DIR --image FILE --out F.h5 [--device auto|cpu|cuda]\n"
                      "   or: vlm vision features --config enc.cfg --image FILE --out F.h5 [--seed N]\n"
                      "Letterboxes the image to vision.image_size, runs the encoder (a Hugging Face SigLIP "
                      "tower with --vision.hf, else one built from the vision.* options and --seed) and writes "
                      "the datasets 'features' [G*G, d_v] (f32) and 'texture' [13, G, G] to HDF5.",
             .options = vision_features_options,
             .run = vision_features,
             .multi_rank = true});

}  // namespace vlm

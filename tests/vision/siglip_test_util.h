// Helpers of the SigLIP import tests: the committed fixtures (tests/data/hf_tiny, made
// by tools/make_siglip_tiny.py), their reference tensors and image, and malformed
// copies of a fixture (a tensor dropped or reshaped, config.json edited), written with
// io/'s safetensors writer.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/image/image_pipeline.h"
#include "io/safetensors.h"
#include "tests/support/files.h"

namespace vlm::test {

inline std::string fixture(const std::string& name) { return std::string(VLM_SOURCE_DIR) + "/tests/data/hf_tiny/" + name; }

// reference.safetensors of the siglip fixture: pixel_values [3,S,S], last_hidden_state [G*G,d].
inline std::vector<float> reference(const std::string& tensor) {
  return SafetensorsFile(fixture("siglip") + "/reference.safetensors").read_f32(tensor);
}

// image.png decoded and letterboxed to S x S (packed RGB; copied as is at S x S).
inline std::vector<uint8_t> fixture_image(int S) {
  const std::string bytes = read_file(fixture("siglip") + "/image.png");
  const RgbImage rgb = decode_rgb(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_FALSE(rgb.empty());
  EXPECT_EQ(rgb.height, S);
  EXPECT_EQ(rgb.width, S);
  std::vector<uint8_t> sq(size_t(S) * size_t(S) * 3);
  letterbox_into(rgb.view(), S, 0, sq.data());
  return sq;
}

// A copy of fixture `name` in dst (created).
inline void copy_fixture(const std::string& name, const std::string& dst) {
  std::filesystem::create_directories(dst);
  for (const auto& e : std::filesystem::directory_iterator(fixture(name)))
    std::filesystem::copy_file(e.path(), std::filesystem::path(dst) / e.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
}

// Rewrites dir/model.safetensors without `drop`, or with `reshape` given the shape `shape`
// (values of that many elements, zeros).
inline void edit_weights(const std::string& dir, const std::string& drop, const std::string& reshape = "",
                         const std::vector<int64_t>& shape = {}) {
  const std::string path = dir + "/model.safetensors";
  std::vector<StWriteTensor> out;
  {
    const SafetensorsFile f(path);
    for (const StTensorInfo& t : f.tensors()) {
      if (t.name == drop) continue;
      if (t.name == reshape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        out.push_back({t.name, shape, std::vector<float>(size_t(n), 0.f)});
      } else {
        out.push_back({t.name, t.shape, f.read_f32(t.name)});
      }
    }
  }
  write_safetensors(path, out);
}

// Replaces the first `from` in dir/config.json by `to`.
inline void edit_config(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string path = dir + "/config.json";
  std::string text = read_file(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  text.replace(at, from.size(), to);
  write_file(path, text);
}

}  // namespace vlm::test

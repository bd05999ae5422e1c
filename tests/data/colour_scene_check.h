// An independent check of a colour-scenes file (data/convert/converters.h
// build_colour_scenes) against the pixels decoded by OpenCV, for the tests of
// tests/data/test_colour_scenes.cpp (the invariants it checks are listed there). Failures
// are gtest failures of the calling test.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/convert/colour_compose.h"

namespace vlm::test {

struct NamedColour {
  std::string name;
  std::array<int, 3> rgb;
};
// The palette as docs/dataset-format.md states it (independent of the header's table).
extern const std::vector<NamedColour> kDocumentedPalette;

// Checks the file at `path` built with scenes of size x size pixels, grid x grid slots and
// min_items..max_items items (questions) each; *captions gets its number of captions.
void check_colour_scenes(const std::string& path, int size, int grid, int max_items, int64_t* captions = nullptr,
                         int min_items = ColourSceneOptions{}.min_items,
                         ColourQuestion question = ColourQuestion::Sentence);

}  // namespace vlm::test

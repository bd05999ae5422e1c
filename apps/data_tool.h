// The options of `vlm data <build|inspect|tokenizer|tokenize>` (apps/cmd_data.cpp,
// apps/cmd_data_inspect.cpp): every subcommand registers all of them, under data.*
// (INI section [data] or --data.x), and shows one usage.
#pragma once
#include <string>

#include "base/options.h"
#include "data/convert/colour_compose.h"
#include "data/convert/converters.h"

namespace vlm {

// Every option of the subcommands; the converters' own are read into BuildOptions and
// SceneOptions (data/convert/converters.h), whose defaults are the options' defaults.
struct DataTool {
  std::string from, input, images, out, stamps, tokenizer, train;
  BuildOptions build;
  SceneOptions scene;
  ColourSceneOptions colour;
  int vocab = 4096, samples = 5;
};

const OptionSet<DataTool>& data_tool();
void register_data_tool_options(Config& c);

// The value of a string option the subcommand needs (UserError "--data.out is required").
const std::string& required_option(const DataTool& d, std::string DataTool::*field);
// The FILE argument when given, else the option `field` (needed).
std::string file_or_option(const Config& c, const DataTool& d, std::string DataTool::*field);

// The usage of every data subcommand.
extern const char* const kDataUsage;

}  // namespace vlm

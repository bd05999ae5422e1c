// Tests of `vlm` commands run as a user runs them (tests/support/files.h run_command):
//  - vlm(), mpirun(n): the program and the launcher (tests registered with CLI);
//  - fashion_subset: a Fashion-MNIST subset built by `vlm data build`, its tokenizer and
//    tokens (the dataset-fashion-mnist package), made once per test suite;
//  - jsonl_values: one key of every line of a JSONL file (metrics.jsonl), as written;
//  - read_csv: the rows of a CSV table the tools write (ablation.csv), by column name;
//  - expect_one_error_line: exit status 2 and exactly one line from vlm on stderr,
//    "<prefix>: error: ..." holding `what` (under mpirun, mpirun's own notice of the
//    status may follow).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tests/support/files.h"

namespace vlm::test {

#ifdef VLM_BINARY  // a test registered with vlm_add_test(... CLI) (tests/support/CMakeLists.txt)
// The `vlm` program of this build, and the prefix that starts n ranks of a command.
inline std::string vlm() { return VLM_BINARY; }
inline std::string mpirun(int n) { return std::string(VLM_MPIEXEC) + " -n " + std::to_string(n) + " --oversubscribe "; }
#endif

struct FashionSubset {
  std::string data, tokenizer;
};
// Builds <dir>/fm.h5 (`limit` images) and <dir>/tok.json (vocabulary `vocab`) with `vlm`
// (the binary); fails the current test when a command fails.
FashionSubset fashion_subset(const std::string& vlm, const std::string& dir, int limit = 400, int vocab = 300);

std::vector<double> jsonl_values(const std::string& path, const std::string& key);

// The fields of `s` between the `sep`s (std::getline's: no trailing empty field).
std::vector<std::string> split(const std::string& s, char sep);
// The rows of a CSV file without quoting (as our tables are written), column name ->
// text; a row with another number of fields than the header fails the current test.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path);

void expect_one_error_line(const CommandResult& r, const std::string& prefix, const std::string& what);

}  // namespace vlm::test

// Tests of `vlm` commands run as a user runs them (tests/support/files.h run_command):
//  - fashion_subset: a Fashion-MNIST subset built by `vlm data build`, its tokenizer and
//    tokens (the dataset-fashion-mnist package), made once per test suite;
//  - jsonl_values: one key of every line of a JSONL file (metrics.jsonl), as written;
//  - expect_one_error_line: exit status 2 and exactly one line from vlm on stderr,
//    "<prefix>: error: ..." holding `what` (under mpirun, mpirun's own notice of the
//    status may follow).
#pragma once
#include <string>
#include <vector>

#include "tests/support/files.h"

namespace vlm::test {

struct FashionSubset {
  std::string data, tokenizer;
};
// Builds <dir>/fm.h5 (`limit` images) and <dir>/tok.json (vocabulary `vocab`) with `vlm`
// (the binary); fails the current test when a command fails.
FashionSubset fashion_subset(const std::string& vlm, const std::string& dir, int limit = 400, int vocab = 300);

std::vector<double> jsonl_values(const std::string& path, const std::string& key);

void expect_one_error_line(const CommandResult& r, const std::string& prefix, const std::string& what);

}  // namespace vlm::test

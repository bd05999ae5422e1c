// Command-line test helpers (tests/support/cli.h).
#include "tests/support/cli.h"

#include <sstream>

#include "base/json.h"

namespace vlm::test {

FashionSubset fashion_subset(const std::string& vlm, const std::string& dir, int limit, int vocab) {
  FashionSubset f{dir + "/fm.h5", dir + "/tok.json"};
  for (const std::string& c :
       {vlm + " data build --data.from fashion-mnist --data.limit " + std::to_string(limit) + " --data.out " + f.data,
        vlm + " data tokenizer --data.train " + f.data + " --data.vocab " + std::to_string(vocab) + " --data.out " +
            f.tokenizer,
        vlm + " data tokenize " + f.data + " --data.tokenizer " + f.tokenizer}) {
    const CommandResult r = run_command(c, dir);
    EXPECT_EQ(r.status, 0) << c << "\n" << r.err;
  }
  return f;
}

std::vector<double> jsonl_values(const std::string& path, const std::string& key) {
  std::vector<double> v;
  const std::string text = read_file(path);
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const json::Value line = json::parse(text.substr(at, nl - at), path);
    if (const json::Value* l = line.find(key)) v.push_back(l->as_double());
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string w;
  while (std::getline(ss, w, sep)) out.push_back(w);
  return out;
}

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  const std::vector<std::string> lines = split(read_file(path), '\n');
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  const std::vector<std::string> head = split(lines[0], ',');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = split(lines[i], ',');
    if (!lines[i].empty() && lines[i].back() == ',') f.push_back("");
    EXPECT_EQ(f.size(), head.size()) << path << " line " << i + 1;
    std::map<std::string, std::string> r;
    for (size_t c = 0; c < head.size() && c < f.size(); ++c) r[head[c]] = f[c];
    rows.push_back(r);
  }
  return rows;
}

void expect_one_error_line(const CommandResult& r, const std::string& prefix, const std::string& what) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  size_t lines = 0, at = 0;
  std::string line;
  while (at < r.err.size()) {
    const size_t nl = r.err.find('\n', at);
    const std::string l = r.err.substr(at, nl - at);
    if (l.rfind("vlm", 0) == 0) ++lines, line = l;
    at = nl == std::string::npos ? r.err.size() : nl + 1;
  }
  EXPECT_EQ(lines, 1u) << "stderr: " << r.err;
  EXPECT_EQ(line.rfind(prefix + ": error: ", 0), 0u) << line;
  EXPECT_NE(line.find(what), std::string::npos) << "expected '" << what << "' in stderr: " << r.err;
}

}  // namespace vlm::test

// GraphBuilder::build (checks, serial order, events) and Graph::run (graph.h).
#include "scheduler/graph.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "base/error.h"

namespace vlm::sched {

GraphBuilder& GraphBuilder::add(TaskSpec spec, TaskFn fn) {
  specs_.push_back(std::move(spec));
  fns_.push_back(std::move(fn));
  return *this;
}

namespace {

// A cycle through the not-yet-ordered tasks, as "a -> b -> a" (follows dependencies).
std::string find_cycle(const std::vector<TaskSpec>& specs, const std::vector<std::vector<int>>& deps,
                       const std::vector<int>& indegree) {
  int start = 0;
  while (indegree[size_t(start)] == 0) ++start;
  std::vector<int> seen(specs.size(), -1), path;
  int v = start;
  while (seen[size_t(v)] < 0) {
    seen[size_t(v)] = int(path.size());
    path.push_back(v);
    for (int d : deps[size_t(v)])
      if (indegree[size_t(d)] > 0) {
        v = d;
        break;
      }
  }
  std::string s;
  for (size_t k = size_t(seen[size_t(v)]); k < path.size(); ++k) s += specs[size_t(path[k])].name + " -> ";
  return s + specs[size_t(v)].name;
}

}  // namespace

Graph GraphBuilder::build(Backend& backend) {
  Graph g;
  const size_t n = specs_.size();
  std::map<std::string, int, std::less<>> index;
  for (size_t i = 0; i < n; ++i) {
    const auto& t = specs_[i];
    VLM_REQUIRE(!t.name.empty(), "task graph: task ", i, " has an empty name");
    VLM_REQUIRE(index.emplace(t.name, int(i)).second, "task graph: task '", t.name, "' is defined twice");
    int s = stream_index(t.stream);
    VLM_REQUIRE(s >= 0, "task graph: task '", t.name, "' names unknown stream '", t.stream,
                "' (expected vision, scorer.0, scorer.1, scorer.2, llm or comm)");
    g.stream_.push_back(s);
  }
  g.deps_.resize(n);
  std::vector<std::vector<int>> users(n);
  std::vector<int> indegree(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& d : specs_[i].after) {
      auto it = index.find(d);
      VLM_REQUIRE(it != index.end(), "task graph: task '", specs_[i].name, "' depends on unknown task '", d, "'");
      auto& deps = g.deps_[i];
      if (std::find(deps.begin(), deps.end(), it->second) != deps.end()) continue;
      deps.push_back(it->second);
      users[size_t(it->second)].push_back(int(i));
      ++indegree[i];
    }
  }
  // Kahn's algorithm, the earliest-added ready task first.
  std::vector<int> remaining = indegree;
  std::vector<bool> done(n, false);
  for (size_t k = 0; k < n; ++k) {
    size_t next = n;
    for (size_t i = 0; i < n; ++i)
      if (!done[i] && remaining[i] == 0) {
        next = i;
        break;
      }
    if (next == n) {
      std::vector<int> left(n, 0);
      for (size_t i = 0; i < n; ++i) left[i] = done[i] ? 0 : 1;
      auto cycle = find_cycle(specs_, g.deps_, left);
      throw UserError(cat("task graph: task '", cycle.substr(0, cycle.find(" -> ")), "' is on a dependency cycle: ",
                          cycle));
    }
    done[next] = true;
    g.order_.push_back(int(next));
    for (int u : users[next]) --remaining[size_t(u)];
  }
  g.backend_ = &backend;
  for (size_t i = 0; i < n; ++i) {
    g.begin_.push_back(backend.create_event(true));
    g.done_.push_back(backend.create_event(true));
  }
  g.host_ms_.assign(n, 0.0);
  g.start_ = backend.create_event(true);
  g.specs_ = std::move(specs_);
  g.fns_ = std::move(fns_);
  g.failed_ = std::make_unique<std::atomic<bool>>(false);
  g.error_mu_ = std::make_unique<std::mutex>();
  specs_.clear();
  fns_.clear();
  return g;
}

Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
Graph::~Graph() = default;

void Graph::body(int i, Stream& s) {
  if (failed_->load(std::memory_order_acquire)) return;
  try {
    fns_[size_t(i)](s);
  } catch (...) {
    std::lock_guard lock(*error_mu_);
    auto pos = [&](int t) { return std::find(order_.begin(), order_.end(), t) - order_.begin(); };
    if (error_task_ < 0 || pos(i) < pos(error_task_)) {
      error_task_ = i;
      error_ = std::current_exception();
    }
    failed_->store(true, std::memory_order_release);
  }
}

void Graph::run(StreamSet& streams, Mode mode, std::vector<TaskTiming>* timings) {
  VLM_ASSERT(&streams.backend() == backend_, "Graph::run: the streams belong to another backend than the graph");
  failed_->store(false);
  error_task_ = -1;
  error_ = nullptr;
  Stream& serial = backend_->default_stream();
  serial.record(*start_);
  for (int i : order_) {
    Stream& s = mode == Mode::Serial ? serial : streams.stream(stream_[size_t(i)]);
    if (mode == Mode::Overlap)
      for (int d : deps_[size_t(i)]) s.wait(*done_[size_t(d)]);
    s.record(*begin_[size_t(i)]);
    const auto t0 = std::chrono::steady_clock::now();
    s.launch([this, i, &s] { body(i, s); });
    host_ms_[size_t(i)] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.record(*done_[size_t(i)]);
  }
  if (mode == Mode::Overlap) streams.synchronize();
  serial.synchronize();
  if (error_) {
    const auto& t = specs_[size_t(error_task_)];
    std::string prefix = cat("task '", t.name, "' on stream '", t.stream, "' failed: ");
    try {
      std::rethrow_exception(error_);
    } catch (const UserError& e) {
      throw UserError(prefix + e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error(prefix + e.what());
    } catch (...) {
      throw std::runtime_error(prefix + "unknown exception");
    }
  }
  if (timings) collect(*timings);
}

void Graph::collect(std::vector<TaskTiming>& timings) {
  timings.resize(size());
  for (size_t i = 0; i < size(); ++i) {
    timings[i].begin_ms = begin_[i]->elapsed_ms(*start_);
    timings[i].end_ms = done_[i]->elapsed_ms(*start_);
    timings[i].host_ms = host_ms_[i];
  }
}

}  // namespace vlm::sched

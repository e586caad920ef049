#include "embedflow_runs/testing.hpp"

#include <memory>

#include "embedflow/testing/capture.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/plugins.hpp"
#include "embedflow_runs/session.hpp"

namespace embedflow::runs::testing {
using namespace engine;
namespace {

// Keeps what one node emits on its collected ports. Taps are called serially per node.
class Collector final : public OutputTap {
 public:
  explicit Collector(std::vector<std::vector<RecordPtr>*> ports) : ports_(std::move(ports)) {}
  void on_record(std::size_t port, const RecordPtr& record) override {
    if (port < ports_.size() && ports_[port]) ports_[port]->push_back(record);
  }
  void on_finish(bool) override {}

 private:
  std::vector<std::vector<RecordPtr>*> ports_;
};

std::string join(const std::vector<Diagnostic>& problems) {
  std::string text;
  for (const auto& d : problems) text += d.str() + "\n";
  return text;
}

}  // namespace

const Registry& plugin_registry(const std::vector<std::string>& search_path) {
  return loaded_plugins(search_path, {}).registry;
}

const std::vector<RecordPtr>& GraphRun::records(const std::string& output) const {
  if (auto it = collected.find(output); it != collected.end()) return it->second;
  const std::vector<RecordPtr>* only = nullptr;
  for (const auto& [name, records] : collected)
    if (name.compare(0, output.size() + 1, output + ".") == 0) {
      if (only) throw ConfigError(cat("GraphRun::records: '", output, "' has several collected outputs; name the port"));
      only = &records;
    }
  if (!only) throw ConfigError(cat("GraphRun::records: output '", output, "' was not collected (GraphRunner::collect)"));
  return *only;
}

std::vector<std::string> GraphRun::lines(const std::string& output) const {
  std::vector<std::string> text;
  for (const auto& r : records(output)) text.push_back(format_record(*r));
  return text;
}

std::string GraphRun::problem_text() const { return join(problems); }

std::string GraphRun::message() const {
  std::string text = problems.empty() ? error : problem_text();
  if (!log.empty()) text += (text.empty() ? "" : "\n") + log;
  return text;
}

GraphRunner::GraphRunner(const Registry& registry, std::string yaml, std::string file_name)
    : registry_(&registry), text_(std::move(yaml)), file_(std::move(file_name)) {}

GraphRunner GraphRunner::from_file(const Registry& registry, const std::string& path) {
  GraphRunner g(registry, "", path);
  g.from_file_ = true;
  return g;
}

GraphRunner& GraphRunner::collect(const std::string& output) {
  collect_.push_back(output);
  return *this;
}

GraphRunner& GraphRunner::threads(int n) {
  threads_ = n;
  return *this;
}

GraphRun GraphRunner::run(const std::vector<std::string>& sets) const { return execute(sets, true); }
GraphRun GraphRunner::validate(const std::vector<std::string>& sets) const { return execute(sets, false); }

GraphRun GraphRunner::execute(const std::vector<std::string>& sets, bool run) const {
  GraphRun result;
  embedflow::testing::LogCapture log;
  std::vector<Diagnostic>& problems = result.problems;
  GraphSpec spec = from_file_ ? load_graph_file(file_, problems) : parse_graph_text(text_, file_, problems);
  ResolvedGraph g = prepare_graph(std::move(spec), problems, sets, std::nullopt, *registry_);
  if (!problems.empty()) {
    result.exit_code = 2;
    result.error = result.problem_text();
    result.log = log.text();
    return result;
  }
  if (!run) {
    result.log = log.text();
    return result;
  }

  // One tap per collecting node, each writing into its ports' vectors of result.collected (map
  // nodes do not move, so the pointers stay valid while the run fills them).
  std::vector<NodePlan> plans(g.nodes.size());
  std::vector<std::vector<std::vector<RecordPtr>*>> taps(g.nodes.size());
  for (const auto& want : collect_) {
    const std::size_t dot = want.find('.');
    const std::string node = want.substr(0, dot);
    const std::string port = dot == std::string::npos ? "" : want.substr(dot + 1);
    std::size_t i = 0;
    while (i < g.nodes.size() && g.nodes[i].id() != node) ++i;
    if (i == g.nodes.size()) {
      bool left_out = false;
      for (const auto& d : g.spec.disabled) left_out = left_out || d == node;
      if (left_out) continue;
      throw ConfigError(cat("GraphRunner::collect: the graph has no node '", node, "'"));
    }
    const NodeType& type = *g.nodes[i].type;
    taps[i].resize(type.outputs.size(), nullptr);
    bool found = false;
    for (std::size_t p = 0; p < type.outputs.size(); ++p)
      if (port.empty() || type.outputs[p].name == port) {
        taps[i][p] = &result.collected[node + "." + type.outputs[p].name];
        found = true;
      }
    if (!found) throw ConfigError(cat("GraphRunner::collect: ", type.name, " has no output '", port, "'"));
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (!taps[i].empty()) plans[i].tap = std::make_shared<Collector>(std::move(taps[i]));

  RunOptions options;
  options.threads = threads_;
  options.plans = &plans;
  RunResult r;
  {
    embedflow::testing::CoutCapture out;
    r = run_graph(g, options);
    result.out = out.text();
  }
  result.exit_code = r.exit_code;
  result.error = r.error;
  result.stats = std::move(r.stats);
  result.log = log.text();
  return result;
}

}  // namespace embedflow::runs::testing

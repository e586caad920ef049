// GraphRunner: runs a whole graph in the test's own process, through the same plugin cache,
// graph preparation (prepare_graph) and run_graph as `embedflow run`, and hands back what the
// CLI would have shown (validation problems, exit code, located error, log lines, printed
// output) plus the records that reached chosen outputs. With NodeRunner
// (embedflow/testing/node_runner.hpp, one node at a time) it replaces spawning the CLI in tests
// that are about nodes rather than about the CLI.
//
//   const Registry& reg = plugin_registry({EMBEDFLOW_TEST_PLUGIN_DIR});
//   GraphRun r = GraphRunner(reg, R"(nodes:
//     numbers: {type: core.range, params: {count: 101}}
//     agg:     {type: core.aggregate, params: {op: {type: core.quantile, q: 0.5}}}
//   edges: [numbers.out -> agg.in]
//   )").collect("agg").run({"agg.op.q=0.25"});        // --set assignments; "seed=N" too
//   REQUIRE(r.exit_code == 0);
//   CHECK(r.lines("agg") == std::vector<std::string>{"{value: 25, count: 101}"});
//
// Outputs are collected through the runtime's OutputTap (the hook the stage cache writes with),
// so a collected output needs no sink, and a collected node runs exactly as it would otherwise.
// Differences from `embedflow run`: `cache:` settings are ignored (as with --no-cache), there is
// no progress line and no SIGINT handling, and relative paths in the graph are relative to the
// test's working directory.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/record.hpp"
#include "embedflow/registry.hpp"
#include "embedflow_engine/runtime.hpp"

namespace embedflow::runs::testing {

// The node and component types of every plugin on `search_path` (then EMBEDFLOW_PLUGIN_PATH and
// the directory beside the executable, as the CLI looks), from the process's one cache of loaded
// plugins (embedflow_runs/plugins.hpp: loaded_plugins); the libraries stay loaded. Throws
// ConfigError when a directory does not exist or a plugin fails to load.
const Registry& plugin_registry(const std::vector<std::string>& search_path);

struct GraphRun {
  std::vector<Diagnostic> problems;  // the graph did not validate: nothing ran, exit_code is 2
  int exit_code = 0;                 // as the CLI's: 0 done, 1 a node failed, 2 invalid
  std::string error;                 // the located message when exit_code != 0
  std::vector<engine::NodeStats> stats;
  std::map<std::string, std::vector<RecordPtr>> collected;  // "node.port" -> records emitted there
  std::string log;  // log lines written during the run ("[info] node: ...")
  std::string out;  // what nodes wrote to std::cout (core.sink)

  // Records of a collected output: "node.port", or "node" when it has one collected port.
  const std::vector<RecordPtr>& records(const std::string& output) const;
  // format_record of each: one line per record, as core.sink prints them.
  std::vector<std::string> lines(const std::string& output) const;
  std::string problem_text() const;  // one problem per line, as `embedflow validate` prints them
  // Everything a failed assertion should show: problems or error, and the log.
  std::string message() const;
};

class GraphRunner {
 public:
  // A graph as text; `file_name` names it in locations ("graph.yaml:3:5: node 'x': ...").
  GraphRunner(const Registry& registry, std::string yaml, std::string file_name = "graph.yaml");
  // A graph file, read at every run().
  static GraphRunner from_file(const Registry& registry, const std::string& path);

  // Records emitted on an output are kept in GraphRun::collected: "node.port", or "node" for all
  // of its outputs. A node left out by `enabled: false` collects nothing.
  GraphRunner& collect(const std::string& output);
  // Worker threads (--threads); 0: every core, the CLI's default.
  GraphRunner& threads(int n);

  // Loads the graph, applies `sets` in order (--set syntax: node.param=value, var=value,
  // seed=N), resolves it and, when it is valid, runs it.
  GraphRun run(const std::vector<std::string>& sets = {}) const;
  // The same without running: `embedflow validate`.
  GraphRun validate(const std::vector<std::string>& sets = {}) const;

 private:
  GraphRun execute(const std::vector<std::string>& sets, bool run) const;
  const Registry* registry_;
  std::string text_, file_;
  bool from_file_ = false;
  std::vector<std::string> collect_;
  int threads_ = 0;
};

}  // namespace embedflow::runs::testing

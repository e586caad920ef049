// NodeRunner: runs one node in the test's own process, the way MediaPipe's CalculatorRunner runs
// one calculator: the test feeds it records and reads what it emitted, with no graph file, no
// engine and no child process.
//
//   const Registry& reg = ...;  // plugins loaded in process (embedflow_runs/testing.hpp: plugin_registry)
//   NodeRunner range(reg, "core.range", "{count: 10}");
//   range.run_source();                                   // open, produce until exhausted, close
//   NodeRunner batch(reg, "core.batch", "{size: 4}", NodeRunner::Options().with_id("batches"));
//   batch.run("in", range.outputs("out"));                // open, push each record, close
//   CHECK(batch.outputs("out").size() == 3);
//   CHECK(format_records(batch.outputs("out"))[2] == "{index: [8, 9], value: [8, 9]}");
//
// What it does as the engine does:
//  - parameters (a Value, or YAML text parsed with parse_yaml) are validated with
//    validate_params, and the type's check hook runs against the input schemas given in Options
//    (embedflow/node_check.hpp, the engine's own code); problems() lists what either found, each
//    as the engine words it. open() throws ConfigError listing them when there are any;
//  - the node's seed is derive_seed(graph seed, node id), so a node named and seeded as in a
//    graph draws the same numbers; components are built with the engine's seeds too;
//  - side ports latch their latest value; stream records pushed before every required side port
//    has one wait and run, in order, right after it arrives; close() with a required side port
//    still empty throws "side input '...' ended without a value";
//  - Emitter::sequence() counts records per input port (a parallel node's stream ports share one
//    count, as the engine's gate numbers them); a source's counts its emitted records.
// What it does not: run records concurrently (a parallel node's process() is called serially),
// bound memory, or catch anything: exceptions from open / process / close propagate as they are,
// so a test can CHECK_THROWS_WITH them. Unlike the engine, no node id or location is added.
//
// Every output port is connected and collected. Log lines and std::cout output of the node's
// calls are captured (log(), out()) instead of going to stderr and stdout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/node.hpp"
#include "embedflow/record.hpp"
#include "embedflow/registry.hpp"
#include "embedflow/value.hpp"

namespace embedflow::testing {

// How the node is named, seeded and fed (NodeRunner::Options).
struct NodeRunnerOptions {
  std::string id = "node";       // the node id: its seed derives from it; messages name it
  std::uint64_t graph_seed = 0;  // the graph's seed (a graph file's `seed:`, --seed)
  // Schema text arriving on an input port ("" or "*": any). A port listed here is connected;
  // other required ports are connected with their declared schema, other optional ones are not.
  std::map<std::string, std::string> inputs;
  int threads = 1;               // NodeContext::threads()
  std::string graph_file;        // NodeContext::graph_file()

  NodeRunnerOptions& with_id(std::string v) { id = std::move(v); return *this; }
  NodeRunnerOptions& with_seed(std::uint64_t v) { graph_seed = v; return *this; }
  NodeRunnerOptions& with_input(const std::string& port, std::string schema) { inputs[port] = std::move(schema); return *this; }
  NodeRunnerOptions& with_threads(int v) { threads = v; return *this; }
};

class NodeRunner {
 public:
  using Options = NodeRunnerOptions;

  // Throws ConfigError for an unknown type (naming the closest one) and for malformed YAML;
  // every other problem goes to problems().
  NodeRunner(const Registry& registry, const std::string& type, const Value& params, Options options = Options());
  NodeRunner(const Registry& registry, const std::string& type, const std::string& yaml_params = "{}",
             Options options = Options());
  ~NodeRunner();
  NodeRunner(const NodeRunner&) = delete;
  NodeRunner& operator=(const NodeRunner&) = delete;

  // --- what validation found ---------------------------------------------------------------
  const std::vector<Diagnostic>& problems() const;
  std::string problem_text() const;  // one problem per line, as `embedflow validate` prints them
  const NodeType& type() const;
  const Params& params() const;      // validated, defaults applied
  std::uint64_t seed() const;        // the node's seed
  const PortSchema& input_schema(const std::string& port) const;
  const PortSchema& output_schema(const std::string& port) const;  // after the check hook

  // --- running -----------------------------------------------------------------------------
  // Creates the node and calls its open(). push, produce and close open it first if needed.
  void open();
  // Delivers a record to an input port (a stream record to process(), a side value to on_side()).
  void push(const std::string& port, RecordPtr record);
  void push(const std::string& port, Record record) { push(port, share(std::move(record))); }
  // Sources: one produce() call; false once the source is exhausted.
  bool produce();
  // Calls every input's end of stream: the node's close().
  void close();
  // open, every record on `port`, close.
  void run(const std::string& port, const std::vector<RecordPtr>& records);
  // Sources: open, produce until exhausted (or stop requested), close.
  void run_source();
  // NodeContext::stop_requested() turns true (as on SIGINT).
  void request_stop();

  // --- what came out ------------------------------------------------------------------------
  const std::vector<RecordPtr>& outputs(const std::string& port) const;
  // Emitter::sequence() at each emit on `port`, parallel to outputs(port).
  const std::vector<std::uint64_t>& sequences(const std::string& port) const;
  void clear_outputs();
  std::uint64_t expected_items() const;  // what a source announced with set_expected_items
  std::string log() const;               // log lines of the node's calls so far
  std::string out() const;               // what its calls wrote to std::cout

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// format_record of each record: one line per record, as core.sink prints them.
std::vector<std::string> format_records(const std::vector<RecordPtr>& records);

}  // namespace embedflow::testing

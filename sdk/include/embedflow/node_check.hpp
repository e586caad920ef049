// Running a node type's check hook: the one SchemaContext implementation, shared by the engine
// (graph load, embedflow_engine/graph.hpp) and the node test harness
// (embedflow/testing/node_runner.hpp), so a node's hook sees the same context in a test as in a
// graph and reports its problems located the same way.
#pragma once

#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/node.hpp"
#include "embedflow/registry.hpp"

namespace embedflow {

// One node as its check hook sees it.
struct CheckedNode {
  const NodeType* type = nullptr;
  std::string id;
  const Params* params = nullptr;         // validated, defaults applied
  const Value* written = nullptr;         // params as written (may be null): locates problems at a parameter
  SourceLocation where;                   // the node's declaration: locates the other problems
  std::vector<PortSchema> inputs;         // what arrives on each input (declared when unknown)
  std::vector<PortSchema> outputs;        // declared, substituted; the hook may replace them
  std::vector<bool> input_connected, output_connected;
};

// Runs node.type->check, when the type has one. What it reports is appended to `problems`
// (Diagnostic{location, node id, message}); an exception it throws becomes one problem at the
// node. Output schemas the hook sets are left in node.outputs.
void run_check_hook(CheckedNode& node, const Registry& registry, std::vector<Diagnostic>& problems);

}  // namespace embedflow

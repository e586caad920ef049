// Human- and machine-readable descriptions: `inspect` (like gst-inspect), the JSON schema dump
// and Graphviz drawings of resolved graphs.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "embedflow/registry.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"

namespace embedflow::engine {

void print_type_list(std::ostream& out, const Registry& registry, const std::vector<LoadedPlugin>& plugins);
void print_node_type(std::ostream& out, const NodeType& type);
void print_component_type(std::ostream& out, const ComponentType& type);
// Every node and component type with parameters and ports, as JSON (sorted, stable: checked in
// as a snapshot so schema changes show up in review).
// `only`: a type name or a plugin name; empty for every type.
void write_schema_json(std::ostream& out, const Registry& registry, const std::string& only = "");
struct DotOptions {
  bool all_params = false;  // false: only the parameters the graph file sets, not the defaults
};
// A graph of more than kDotCompactNodes nodes is laid out top to bottom, with port schemas as
// edge tooltips instead of labels, so it stays readable.
inline constexpr std::size_t kDotCompactNodes = 12;
void write_dot(std::ostream& out, const ResolvedGraph& graph, const DotOptions& options = {});

}  // namespace embedflow::engine

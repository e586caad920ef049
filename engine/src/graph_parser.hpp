// The graph file's reader: YAML nodes -> GraphSpec and subgraph definitions, keeping the line
// and column of everything. Shared by graph_file.cpp (the graph) and subgraph.cpp (expansion).
#pragma once

#include <embedflow/yaml.hpp>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "embedflow_engine/graph_file.hpp"

namespace embedflow::engine::detail {

// An instance port's inside: the node ports an input feeds, or the one port an output reads.
struct PortEnd {
  std::string node, port;  // port empty = the node's only port on that side
};
struct SubgraphPort {
  std::string name;
  std::vector<PortEnd> ends;  // inputs: one or more; outputs: exactly one
  SourceLocation where;
};

// A subgraph as defined under `subgraphs:` (or in the file named there).
struct SubgraphDef {
  std::string name;
  SourceLocation where;  // its name under subgraphs:
  // Parameters with their defaults, in order; a default of null makes the parameter required.
  std::vector<std::pair<std::string, Value>> params;
  std::vector<SubgraphPort> inputs, outputs;
  GraphSpec body;  // nodes and edges with ids as written inside
  bool unreadable = false;  // its file could not be read (reported): instances add no problems
};

// One YAML document from `text` (the graph file's rules: UTF-8, one document); nullopt with
// problems appended when there is none.
std::optional<YAML::Node> load_yaml_document(const std::string& text, const std::string& file,
                                              std::vector<Diagnostic>& problems);

inline SourceLocation loc(const std::string& file, const YAML::Mark& m) { return yaml_location(file, m.line, m.column); }

// Calls `f` on every scalar inside `v` (lists and maps walked in order), rebuilding the containers
// around what `f` leaves: how variables and subgraph parameters are substituted in place.
template <class F>
void rewrite_scalars(Value& v, F&& f) {
  if (v.is_list()) {
    Value::List items = v.as_list();
    for (auto& item : items) rewrite_scalars(item, f);
    const SourceLocation w = v.where();
    v = Value::list(std::move(items));
    v.at(w);
  } else if (v.is_map()) {
    for (const auto& [k, item] : Value::Map(v.as_map())) {
      Value copy = item;
      rewrite_scalars(copy, f);
      v.set(k, copy);
    }
  } else {
    f(v);
  }
}

struct Parser {
  std::string file;
  std::vector<Diagnostic>& problems;
  YamlBudget budget;  // values and bytes converted so far: the alias-expansion limits are per document
  std::vector<SubgraphDef> subgraphs;  // `subgraphs:` as read

  Value to_value(const YAML::Node& n) { return yaml_to_value(n, file, &problems, &budget); }
  void fail(const YAML::Node& at, const std::string& msg, const std::string& node = "") {
    problems.push_back(Diagnostic{loc(file, at.Mark()), node, msg});
  }
  // The maps the parser reads by key itself (the file, a node, vars): a repeated key would make
  // yaml-cpp's lookup see only the first, so of two `nodes:` blocks one would vanish silently.
  void repeated_keys(const YAML::Node& map, const std::string& node = "");

  GraphSpec parse(const YAML::Node& root, const std::string& text);
  void parse_node(GraphSpec& g, const std::string& id, const YAML::Node& key, const YAML::Node& body);
  void parse_edge(GraphSpec& g, const YAML::Node& e);
  // `nodes:` and `edges:` of a graph or a subgraph body.
  void parse_nodes_and_edges(GraphSpec& g, const YAML::Node& map);

 private:
  void parse_settings(GraphSpec& g, const YAML::Node& root);
  void parse_subgraphs(const YAML::Node& block);
  void parse_subgraph(SubgraphDef& def, const YAML::Node& body);
  void parse_ports(SubgraphDef& def, const YAML::Node& block, bool inputs);
  std::optional<PortEnd> parse_port_end(const YAML::Node& n);
};

// Replaces every node that instantiates one of `defs` by the subgraph's nodes (recursively),
// rewriting edges to and from the instances' ports. Problems are located at the use site or
// inside the definition.
void expand_subgraphs(GraphSpec& g, const std::vector<SubgraphDef>& defs, std::vector<Diagnostic>& problems);

}  // namespace embedflow::engine::detail

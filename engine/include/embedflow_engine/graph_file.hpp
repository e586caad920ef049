// Graph files: YAML -> GraphSpec, keeping the line and column of everything so validation can
// point at it. Parsing checks only the file's shape (keys, kinds); meaning is checked by
// validate() once plugins are loaded.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/params.hpp"
#include "embedflow/value.hpp"

namespace embedflow::engine {

// One use of a subgraph that made a node or an edge: the instance's id as expanded (an instance
// nested in another is "outer__inner"), the subgraph's name, where the instance is written and
// where the subgraph is defined.
struct SubgraphUse {
  std::string instance;
  std::string subgraph;
  SourceLocation used_at;
  SourceLocation defined_at;
};

struct NodeSpec {
  std::string id;
  std::string type;
  Value params;          // map (or null)
  Value cache;           // null, boolean, or map of cache options
  Value enabled;         // null (enabled), boolean, or "${var}" until variables are applied
  std::int64_t in_flight = 0;  // sources: cap on messages in flight (0 = graph default)
  SourceLocation where;       // the node's id
  SourceLocation type_where;  // its type value
  std::vector<SubgraphUse> within;  // the subgraph instances that made it, outermost first
};

struct EdgeSpec {
  std::string text;  // as written
  std::string from_node, from_port;  // port empty = the node's only output
  std::string to_node, to_port;      // port empty = the node's only input
  SourceLocation where;
  std::vector<SubgraphUse> within;  // an edge written inside a subgraph: its instances
};

struct GraphSpec {
  std::string file;
  std::string description;  // the leading comment block
  std::uint64_t seed = 0;
  std::int64_t max_in_flight = 64;  // default per-source cap
  // `vars:` — named values that params refer to as "${name}" (the whole string: the value keeps
  // its type; inside a longer string: its text). `--set name=value` overrides one.
  std::vector<std::pair<std::string, Value>> vars;
  // `out:` — the run's output folder (run.json, the resolved graph, metrics.jsonl, the report);
  // may use "${var}". Null when the file does not name one.
  Value out;
  // `plugin_dirs:` — extra plugin directories, relative to the graph file, searched before the
  // default ones.
  std::vector<std::string> plugin_dirs;
  std::vector<NodeSpec> nodes;
  std::vector<EdgeSpec> edges;
  std::vector<std::string> disabled;  // filled by resolve(): nodes left out by `enabled: false`
  // Where overridden variables went, so a problem with such a value names the override as well as
  // the graph line: `var_origins` (by apply_override) maps a variable to the override that set it
  // ("--set steps=abc"); apply_vars adds the variables that take text from one, and records every
  // place a value from an override was substituted in `override_uses`.
  struct OverrideUse {
    SourceLocation at;   // the "${name}" in the graph file
    std::string var, origin;
  };
  std::map<std::string, std::string> var_origins;
  std::vector<OverrideUse> override_uses;

  const NodeSpec* node(const std::string& id) const;
  NodeSpec* node(const std::string& id);
};

// Parses a graph file. Shape errors (malformed YAML, unknown keys, bad edge syntax) are appended
// to `problems`; the returned spec holds whatever could be read.
// Bounds on a graph file's size (a validation error beyond them, located at `nodes:`/`edges:`).
inline constexpr std::size_t kMaxGraphNodes = 10000, kMaxGraphEdges = 100000;

GraphSpec load_graph_file(const std::string& path, std::vector<Diagnostic>& problems);
GraphSpec parse_graph_text(const std::string& text, const std::string& file_name, std::vector<Diagnostic>& problems);

// Subgraphs (`subgraphs:` in a graph file, a definition or the name of a file holding one) are
// expanded by parsing: a node whose `type` names a subgraph becomes the subgraph's nodes, with
// ids "<instance>__<node>" and the instance's parameters substituted, and edges to and from the
// instance's ports become edges to and from the nodes inside. Everything after parsing sees plain
// nodes (overrides, variables, validation, caches, the recorded graph).
//
// Problems from index `first` on that concern a node or an edge a subgraph made get the use site
// appended ("(in subgraph 'evaluate' at g.yaml:12:3, used as 'eval_tc1' at g.yaml:40:3)"): their
// location is the line inside the subgraph, which every instance shares.
void name_subgraph_uses(const GraphSpec& spec, std::vector<Diagnostic>& problems, std::size_t first = 0);

// Applies --set node.param=value (value in YAML syntax: 3, 0.5, true, [1, 2], {type: x}).
// "seed=N", "node.cache=false", "node.enabled=false" and "var=value" (a name from `vars:`) are
// accepted too.
void apply_override(GraphSpec& spec, const std::string& assignment, std::vector<Diagnostic>& problems);

// Replaces "${name}" in every node's params, cache and enabled by the graph's vars. Unknown
// names are problems located at the value. Returns false when the expansion passed
// kMaxYamlBytes and stopped (reported once): the graph is then not checked further.
bool apply_vars(GraphSpec& spec, std::vector<Diagnostic>& problems);

// Problems in `problems` from index `first` on that are located at a "${name}" whose value came
// from an override are located at the override instead ("--set steps=abc: node 'train': ..."),
// the graph line they were found at added to the message ("(${steps} at g.yaml:12:12)").
void name_override_origins(const GraphSpec& spec, std::vector<Diagnostic>& problems, std::size_t first = 0);

// The graph as a YAML graph file that reproduces it: seed, max_in_flight, out, every node's
// type, params (as given, variables substituted), cache, enabled and in_flight, and the edges;
// no vars (they are applied). Numbers are written shortest round-trip.
std::string graph_to_yaml(const GraphSpec& spec, const std::string& header_comment);

}  // namespace embedflow::engine

#include "graph_parser.hpp"

#include <embedflow/csv.hpp>
#include <embedflow/file_kind.hpp>
#include <embedflow/suggest.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace embedflow::engine::detail {

namespace fs = std::filesystem;

std::optional<YAML::Node> load_yaml_document(const std::string& text, const std::string& file,
                                              std::vector<Diagnostic>& problems) {
  // YAML text is UTF-8. yaml-cpp given other bytes can spin for a minute and gigabytes (a 354-byte
  // graph with a run of 0xa0 bytes did), so they are refused at their line before it sees them.
  std::size_t bad_at = 0;
  if (std::string why = csv_bytes_problem(text, &bad_at); !why.empty()) {
    const std::size_t line_start = text.rfind('\n', bad_at == 0 ? 0 : bad_at - 1);
    const auto line = static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad_at), '\n'));
    const auto column = static_cast<int>(line_start == std::string::npos || bad_at == 0 ? bad_at : bad_at - line_start - 1);
    problems.push_back(Diagnostic{yaml_location(file, line, column), "", why + " (a graph file is UTF-8 text)"});
    return std::nullopt;
  }
  SourceLocation second;
  std::optional<YAML::Node> root;  // built in place: assigning to a YAML::Node assigns into the node it refers to
  try {
    root.emplace(first_yaml_document(text, file, second));
  } catch (const YAML::Exception& e) {
    problems.push_back(Diagnostic{loc(file, e.mark), "", "malformed YAML: " + e.msg});
    return std::nullopt;
  }
  if (second.line > 0) {
    problems.push_back(Diagnostic{second, "", "a second YAML document ('---'): a graph file holds one"});
    return std::nullopt;
  }
  if (!root->IsDefined()) return YAML::Node();  // empty text: "a graph file is a map"
  return root;
}

void Parser::repeated_keys(const YAML::Node& map, const std::string& node) {
  std::map<std::string, int> seen;
  for (const auto& kv : map) {
    auto [first, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark().line + 1);
    if (!fresh) fail(kv.first, cat("key '", kv.first.Scalar(), "' is given twice (first at line ", first->second, ")"), node);
  }
}

void Parser::parse_edge(GraphSpec& g, const YAML::Node& e) {
  if (!e.IsScalar()) {
    fail(e, "an edge is a string 'node.port -> node.port'");
    return;
  }
  static const std::regex pattern(R"(^\s*([A-Za-z_][\w-]*)(?:\.([A-Za-z_]\w*))?\s*->\s*([A-Za-z_][\w-]*)(?:\.([A-Za-z_]\w*))?\s*$)");
  std::smatch m;
  const std::string text = e.Scalar();
  if (!std::regex_match(text, m, pattern)) {
    fail(e, cat("bad edge '", text, "': expected 'node.port -> node.port' (ports may be omitted for single-port nodes)"));
    return;
  }
  EdgeSpec edge;
  edge.text = text;
  edge.from_node = m[1];
  edge.from_port = m[2];
  edge.to_node = m[3];
  edge.to_port = m[4];
  edge.where = loc(file, e.Mark());
  g.edges.push_back(std::move(edge));
}

void Parser::parse_node(GraphSpec& g, const std::string& id, const YAML::Node& key, const YAML::Node& body) {
  NodeSpec n;
  n.id = id;
  n.where = loc(file, key.Mark());
  static const std::regex id_pattern(R"(^[A-Za-z_][\w-]*$)");
  if (!std::regex_match(id, id_pattern)) fail(key, cat("bad node id '", id, "': use letters, digits, _ and -"));
  if (g.node(id)) fail(key, cat("node id '", id, "' is used twice"), id);
  if (!body.IsMap()) {
    fail(body, "a node is a map with at least 'type'", id);
    g.nodes.push_back(std::move(n));
    return;
  }
  static const std::set<std::string> keys{"type", "params", "cache", "enabled", "in_flight", "doc"};
  repeated_keys(body, id);
  for (const auto& kv : body) {
    const std::string k = kv.first.Scalar();
    if (!keys.count(k)) {
      fail(kv.first, cat("unknown key '", k, "' (a node has type, params, cache, enabled, in_flight, doc)",
                         did_you_mean(k, {keys.begin(), keys.end()})), id);
    }
  }
  if (!body["type"] || !body["type"].IsScalar()) {
    fail(body, "missing 'type: family.name'", id);
  } else {
    n.type = body["type"].Scalar();
    n.type_where = loc(file, body["type"].Mark());
  }
  if (body["params"]) {
    n.params = to_value(body["params"]);
    if (!n.params.is_map() && !n.params.is_null()) fail(body["params"], "params must be a map", id);
  } else {
    n.params = Value::map({});
    n.params.at(n.where);
  }
  if (body["cache"]) {
    n.cache = to_value(body["cache"]);
    if (!n.cache.is_boolean() && !n.cache.is_map()) fail(body["cache"], "cache is true, false or a map of options", id);
  }
  if (body["enabled"]) {
    n.enabled = to_value(body["enabled"]);
    if (!n.enabled.is_boolean() && !n.enabled.is_string())
      fail(body["enabled"], "enabled is true, false or \"${variable}\"", id);
  }
  if (body["in_flight"]) {
    Value v = to_value(body["in_flight"]);
    if (!v.is_integer() || v.as_integer() < 1) fail(body["in_flight"], "in_flight must be a positive integer", id);
    else n.in_flight = v.as_integer();
  }
  g.nodes.push_back(std::move(n));
}

void Parser::parse_nodes_and_edges(GraphSpec& g, const YAML::Node& map) {
  auto nodes = map["nodes"];
  if (!nodes) {
    fail(map, "missing 'nodes'");
  } else if (!nodes.IsMap()) {
    fail(nodes, "'nodes' must be a map of id: {type: ..., params: {...}}");
  } else if (nodes.size() > kMaxGraphNodes) {
    // Far beyond any experiment; a generated or hostile file would otherwise cost a thread
    // pool's worth of TBB nodes and plugin instances before anything runs.
    fail(nodes, cat("the graph has ", nodes.size(), " nodes; at most ", kMaxGraphNodes, " are allowed"));
  } else {
    for (const auto& kv : nodes) parse_node(g, kv.first.Scalar(), kv.first, kv.second);
  }
  auto edges = map["edges"];
  if (edges) {
    if (!edges.IsSequence()) fail(edges, "'edges' must be a list of 'a.out -> b.in'");
    else if (edges.size() > kMaxGraphEdges)
      fail(edges, cat("the graph has ", edges.size(), " edges; at most ", kMaxGraphEdges, " are allowed"));
    else
      for (const auto& e : edges) parse_edge(g, e);
  }
}

void Parser::parse_settings(GraphSpec& g, const YAML::Node& root) {
  if (auto s = root["seed"]) {
    Value v = to_value(s);
    if (!v.is_integer() || v.as_integer() < 0) fail(s, "seed must be a non-negative integer");
    else g.seed = static_cast<std::uint64_t>(v.as_integer());
  }
  if (auto s = root["max_in_flight"]) {
    Value v = to_value(s);
    if (!v.is_integer() || v.as_integer() < 1) fail(s, "max_in_flight must be a positive integer");
    else g.max_in_flight = v.as_integer();
  }
  if (auto o = root["out"]) {
    Value v = to_value(o);
    if (!v.is_string() || v.as_string().empty()) fail(o, "out must be a directory path (the run's output folder)");
    else g.out = v;
  }
  if (auto d = root["plugin_dirs"]) {
    Value v = to_value(d);
    bool ok = v.is_list();
    if (ok)
      for (const auto& item : v.as_list()) ok = ok && item.is_string();
    if (!ok) fail(d, "plugin_dirs must be a list of directories (relative to the graph file)");
    else
      for (const auto& item : v.as_list()) g.plugin_dirs.push_back(item.as_string());
  }
  if (auto s = root["description"]) {
    if (s.IsScalar()) g.description = s.Scalar();
  }
  if (auto v = root["vars"]) {
    if (!v.IsMap()) fail(v, "'vars' must be a map of name: value");
    else if (repeated_keys(v), true)
      for (const auto& kv : v) {
        static const std::regex name_pattern(R"(^[A-Za-z_]\w*$)");
        if (!std::regex_match(kv.first.Scalar(), name_pattern)) fail(kv.first, "bad variable name '" + kv.first.Scalar() + "'");
        g.vars.emplace_back(kv.first.Scalar(), to_value(kv.second));
      }
  }
}

GraphSpec Parser::parse(const YAML::Node& root, const std::string& text) {
  GraphSpec g;
  g.file = file;
  // The leading comment block is the graph's description (shown by inspect and dot).
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line) && !line.empty() && line[0] == '#') {
    std::string body = line.substr(1);
    if (!body.empty() && body[0] == ' ') body.erase(0, 1);
    g.description += (g.description.empty() ? "" : "\n") + body;
  }
  if (!root.IsMap()) {
    fail(root, "a graph file is a map with 'nodes' and 'edges'");
    return g;
  }
  static const std::set<std::string> keys{"seed", "vars", "nodes", "edges", "max_in_flight", "description", "out",
                                          "plugin_dirs", "subgraphs"};
  repeated_keys(root);
  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (!keys.count(k)) {
      fail(kv.first, cat("unknown top-level key '", k,
                         "' (expected seed, vars, nodes, edges, max_in_flight, out, plugin_dirs, subgraphs)",
                         did_you_mean(k, {keys.begin(), keys.end()})));
    }
  }
  parse_settings(g, root);
  if (auto s = root["subgraphs"]) parse_subgraphs(s);
  parse_nodes_and_edges(g, root);
  return g;
}

// --- subgraph definitions -----------------------------------------------------------------

void Parser::parse_subgraphs(const YAML::Node& block) {
  if (!block.IsMap()) {
    fail(block, "'subgraphs' must be a map of name: {params, inputs, outputs, nodes, edges} or name: file.yaml");
    return;
  }
  repeated_keys(block);
  for (const auto& kv : block) {
    SubgraphDef def;
    def.name = kv.first.Scalar();
    def.where = loc(file, kv.first.Mark());
    static const std::regex name_pattern(R"(^[A-Za-z_][\w-]*$)");
    if (!std::regex_match(def.name, name_pattern))
      fail(kv.first, cat("bad subgraph name '", def.name, "': use letters, digits, _ and - (node types have a dot; subgraphs do not)"));
    if (!kv.second.IsScalar()) {
      def.body.file = file;
      parse_subgraph(def, kv.second);
      subgraphs.push_back(std::move(def));
      continue;
    }
    // A file holding the definition, relative to this file's folder.
    const fs::path path = fs::path(file).parent_path() / kv.second.Scalar();
    def.unreadable = true;  // until read
    if (const std::string kind = special_file_kind(path); !kind.empty()) {
      fail(kv.second, cat("subgraph file '", path.string(), "' is a ", kind, ", not a regular file"));
      subgraphs.push_back(std::move(def));
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      fail(kv.second, cat("cannot open subgraph file '", path.string(), "'"));
      subgraphs.push_back(std::move(def));
      continue;
    }
    std::ostringstream text;
    text << in.rdbuf();
    const std::optional<YAML::Node> doc = load_yaml_document(text.str(), path.string(), problems);
    if (!doc) {
      subgraphs.push_back(std::move(def));
      continue;
    }
    def.unreadable = false;
    Parser inner{path.string(), problems, YamlBudget{}, {}};
    def.body.file = path.string();
    inner.parse_subgraph(def, *doc);
    subgraphs.push_back(std::move(def));
  }
}

void Parser::parse_subgraph(SubgraphDef& def, const YAML::Node& body) {
  if (!body.IsMap()) {
    fail(body, cat("subgraph '", def.name, "' is a map with params, inputs, outputs, nodes and edges"));
    return;
  }
  static const std::set<std::string> keys{"doc", "params", "inputs", "outputs", "nodes", "edges"};
  repeated_keys(body);
  for (const auto& kv : body) {
    const std::string k = kv.first.Scalar();
    if (!keys.count(k))
      fail(kv.first, cat("subgraph '", def.name, "': unknown key '", k, "' (a subgraph has doc, params, inputs, outputs, nodes, edges)",
                         did_you_mean(k, {keys.begin(), keys.end()})));
  }
  if (auto d = body["doc"]; d && d.IsScalar()) def.body.description = d.Scalar();
  if (auto p = body["params"]) {
    if (!p.IsMap()) fail(p, cat("subgraph '", def.name, "': params is a map of name: default (~ for a required one)"));
    else if (repeated_keys(p), true)
      for (const auto& kv : p) {
        static const std::regex name_pattern(R"(^[A-Za-z_]\w*$)");
        if (!std::regex_match(kv.first.Scalar(), name_pattern)) fail(kv.first, "bad parameter name '" + kv.first.Scalar() + "'");
        Value v = to_value(kv.second);
        if (v.is_null()) v.at(loc(file, kv.first.Mark()));
        def.params.emplace_back(kv.first.Scalar(), std::move(v));
      }
  }
  if (auto i = body["inputs"]) parse_ports(def, i, true);
  if (auto o = body["outputs"]) parse_ports(def, o, false);
  parse_nodes_and_edges(def.body, body);
}

std::optional<PortEnd> Parser::parse_port_end(const YAML::Node& n) {
  static const std::regex pattern(R"(^\s*([A-Za-z_][\w-]*)(?:\.([A-Za-z_]\w*))?\s*$)");
  std::smatch m;
  const std::string text = n.IsScalar() ? n.Scalar() : "";
  if (!n.IsScalar() || !std::regex_match(text, m, pattern)) {
    fail(n, cat("a subgraph port names a node port inside it: 'node.port' (or 'node' for a single-port node)"));
    return std::nullopt;
  }
  return PortEnd{m[1], m[2]};
}

void Parser::parse_ports(SubgraphDef& def, const YAML::Node& block, bool inputs) {
  const char* side = inputs ? "inputs" : "outputs";
  if (!block.IsMap()) {
    fail(block, cat("subgraph '", def.name, "': ", side, " is a map of port: ",
                    inputs ? "node.port or [node.port, ...]" : "node.port"));
    return;
  }
  repeated_keys(block);
  for (const auto& kv : block) {
    SubgraphPort port;
    port.name = kv.first.Scalar();
    port.where = loc(file, kv.first.Mark());
    static const std::regex name_pattern(R"(^[A-Za-z_]\w*$)");
    if (!std::regex_match(port.name, name_pattern)) fail(kv.first, "bad port name '" + port.name + "'");
    if (kv.second.IsSequence()) {
      if (!inputs) fail(kv.second, cat("subgraph '", def.name, "': output '", port.name, "' reads one node port, not a list"));
      for (const auto& item : kv.second)
        if (auto end = parse_port_end(item)) port.ends.push_back(*end);
    } else if (auto end = parse_port_end(kv.second)) {
      port.ends.push_back(*end);
    }
    (inputs ? def.inputs : def.outputs).push_back(std::move(port));
  }
}

}  // namespace embedflow::engine::detail

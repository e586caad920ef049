#include "embedflow_engine/graph_file.hpp"

#include <embedflow/csv.hpp>
#include <embedflow/suggest.hpp>
#include <embedflow/yaml.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace embedflow::engine {

const NodeSpec* GraphSpec::node(const std::string& id) const {
  for (const auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}
NodeSpec* GraphSpec::node(const std::string& id) {
  for (auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

namespace {

SourceLocation loc(const std::string& file, const YAML::Mark& m) { return yaml_location(file, m.line, m.column); }

struct Parser {
  std::string file;
  std::vector<Diagnostic>& problems;
  YamlBudget budget;  // values and bytes converted so far: the alias-expansion limits are per document

  Value to_value(const YAML::Node& n) { return yaml_to_value(n, file, &problems, &budget); }

  // The maps the parser reads by key itself (the file, a node, vars): a repeated key would make
  // yaml-cpp's lookup see only the first, so of two `nodes:` blocks one would vanish silently.
  void repeated_keys(const YAML::Node& map, const std::string& node = "") {
    std::map<std::string, int> seen;
    for (const auto& kv : map) {
      auto [first, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark().line + 1);
      if (!fresh) fail(kv.first, cat("key '", kv.first.Scalar(), "' is given twice (first at line ", first->second, ")"), node);
    }
  }

  void fail(const YAML::Node& at, const std::string& msg, const std::string& node = "") {
    problems.push_back(Diagnostic{loc(file, at.Mark()), node, msg});
  }

  void parse_edge(GraphSpec& g, const YAML::Node& e) {
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

  void parse_node(GraphSpec& g, const std::string& id, const YAML::Node& key, const YAML::Node& body) {
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

  GraphSpec parse(const YAML::Node& root, const std::string& text) {
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
                                            "plugin_dirs"};
    repeated_keys(root);
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      if (!keys.count(k)) {
        fail(kv.first, cat("unknown top-level key '", k, "' (expected seed, vars, nodes, edges, max_in_flight, out, plugin_dirs)",
                           did_you_mean(k, {keys.begin(), keys.end()})));
      }
    }
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
    auto nodes = root["nodes"];
    if (!nodes) {
      fail(root, "missing 'nodes'");
    } else if (!nodes.IsMap()) {
      fail(nodes, "'nodes' must be a map of id: {type: ..., params: {...}}");
    } else if (nodes.size() > kMaxGraphNodes) {
      // Far beyond any experiment; a generated or hostile file would otherwise cost a thread
      // pool's worth of TBB nodes and plugin instances before anything runs.
      fail(nodes, cat("the graph has ", nodes.size(), " nodes; at most ", kMaxGraphNodes, " are allowed"));
    } else {
      for (const auto& kv : nodes) parse_node(g, kv.first.Scalar(), kv.first, kv.second);
    }
    auto edges = root["edges"];
    if (edges) {
      if (!edges.IsSequence()) fail(edges, "'edges' must be a list of 'a.out -> b.in'");
      else if (edges.size() > kMaxGraphEdges)
        fail(edges, cat("the graph has ", edges.size(), " edges; at most ", kMaxGraphEdges, " are allowed"));
      else
        for (const auto& e : edges) parse_edge(g, e);
    }
    return g;
  }
};

}  // namespace

GraphSpec parse_graph_text(const std::string& text, const std::string& file_name, std::vector<Diagnostic>& problems) {
  // YAML text is UTF-8. yaml-cpp given other bytes can spin for a minute and gigabytes (a 354-byte
  // graph with a run of 0xa0 bytes did), so they are refused at their line before it sees them.
  std::size_t bad_at = 0;
  if (std::string why = csv_bytes_problem(text, &bad_at); !why.empty()) {
    const std::size_t line_start = text.rfind('\n', bad_at == 0 ? 0 : bad_at - 1);
    const auto line = static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad_at), '\n'));
    const auto column = static_cast<int>(line_start == std::string::npos || bad_at == 0 ? bad_at : bad_at - line_start - 1);
    problems.push_back(Diagnostic{yaml_location(file_name, line, column), "", why + " (a graph file is UTF-8 text)"});
    GraphSpec g;
    g.file = file_name;
    return g;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    problems.push_back(Diagnostic{loc(file_name, e.mark), "", "malformed YAML: " + e.msg});
  }
  if (docs.size() > 1)
    problems.push_back(Diagnostic{loc(file_name, docs[1].Mark()), "",
                                  "a second YAML document ('---'): a graph file holds one"});
  if (docs.size() > 1 || (docs.empty() && !problems.empty())) {
    GraphSpec g;
    g.file = file_name;
    return g;
  }
  const YAML::Node root = docs.empty() ? YAML::Node() : docs.front();  // empty text: "a graph file is a map"
  Parser p{file_name, problems, YamlBudget{}};
  GraphSpec g = p.parse(root, text);
  if (p.budget.values > kMaxYamlValues || p.budget.bytes > kMaxYamlBytes) {
    // The limit's problem says it all: what was left unread would only add follow-on problems.
    GraphSpec empty;
    empty.file = file_name;
    return empty;
  }
  return g;
}

GraphSpec load_graph_file(const std::string& path, std::vector<Diagnostic>& problems) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    problems.push_back(Diagnostic{SourceLocation{path, 0, 0}, "", "cannot open graph file"});
    GraphSpec g;
    g.file = path;
    return g;
  }
  std::ostringstream s;
  s << f.rdbuf();
  return parse_graph_text(s.str(), path, problems);
}


void apply_override(GraphSpec& spec, const std::string& assignment, std::vector<Diagnostic>& problems) {
  SourceLocation where{"--set " + assignment, 0, 0};
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    problems.push_back(Diagnostic{where, "", "expected --set node.param=value"});
    return;
  }
  std::string key = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  Value value;
  try {
    value = parse_yaml(text, "");
  } catch (const ConfigError& e) {
    problems.push_back(Diagnostic{where, "", cat("value is not valid YAML (", e.what(), ")")});
    return;
  }
  value.at(where);
  if (key == "seed") {
    if (!value.is_integer() || value.as_integer() < 0) problems.push_back(Diagnostic{where, "", "seed must be a non-negative integer"});
    else spec.seed = static_cast<std::uint64_t>(value.as_integer());
    return;
  }
  auto dot = key.find('.');
  if (dot == std::string::npos) {
    for (auto& [name, v] : spec.vars)
      if (name == key) {
        v = value;
        spec.var_origins[name] = where.file;
        return;
      }
    std::vector<std::string> names;
    for (const auto& kv : spec.vars) names.push_back(kv.first);
    problems.push_back(Diagnostic{where, "", cat("expected --set node.param=value, seed=N or var=value; the graph has no variable '", key, "'",
                                                 did_you_mean(key, names))});
    return;
  }
  std::string node_id = key.substr(0, dot);
  std::string param = key.substr(dot + 1);
  NodeSpec* node = spec.node(node_id);
  if (!node) {
    std::vector<std::string> ids;
    for (const auto& n : spec.nodes) ids.push_back(n.id);
    problems.push_back(Diagnostic{where, "", cat("no node '", node_id, "' in the graph", did_you_mean(node_id, ids))});
    return;
  }
  if (param == "cache") {
    node->cache = value;
    return;
  }
  if (param == "enabled") {
    if (!value.is_boolean()) problems.push_back(Diagnostic{where, node_id, "enabled must be true or false"});
    else node->enabled = value;
    return;
  }
  if (!node->params.is_map()) node->params = Value::map({});
  // Dotted paths reach into component specs: --set train.loss.margin=0.5
  Value* target = &node->params;
  std::string rest = param;
  for (auto d = rest.find('.'); d != std::string::npos; d = rest.find('.')) {
    std::string head = rest.substr(0, d);
    Value* next = target->get_mutable(head);
    if (!next) {
      target->set(head, Value::map({}));
      next = target->get_mutable(head);
    } else if (next->is_string()) {
      // Shorthand component spec "loss: torch.contrastive" becomes a map to accept a param.
      Value m = Value::map({{"type", *next}});
      m.at(next->where());
      *next = m;
    }
    target = next;
    rest = rest.substr(d + 1);
  }
  target->set(rest, value);
}

}  // namespace embedflow::engine

namespace embedflow::engine {

namespace {

// What variables expand to, counted over the whole graph: a variable may name another twice
// ("${b}${b}", or [${b}, ${b}] with b: [${c}, ${c}], ...), so 30 short lines could otherwise
// double into gigabytes. Past 1 MiB of text or 10,000 values — a graph's variables expand to
// kilobytes — substitution stops with one problem.
constexpr std::size_t kMaxExpansionBytes = 1u << 20, kMaxExpansionValues = 10'000;
struct ExpansionBudget {
  std::size_t bytes = 0, values = 0;
  bool exceeded = false;
  bool over() const { return bytes > kMaxExpansionBytes || values > kMaxExpansionValues; }
};

// Adds the text (scalars, map keys) and values of `v` to `size`, stopping once it is over.
void add_size(const Value& v, ExpansionBudget& size) {
  ++size.values;
  if (v.is_list()) {
    for (const auto& item : v.as_list())
      if (add_size(item, size), size.over()) return;
  } else if (v.is_map()) {
    for (const auto& [k, item] : v.as_map()) {
      size.bytes += k.size();
      if (add_size(item, size), size.over()) return;
    }
  } else {
    size.bytes += v.is_string() ? v.as_string().size() : 8;
  }
}

// Adds an expansion of `bytes` and `values`; false (reported once, at `where`) past the budget.
bool spend(ExpansionBudget& budget, std::size_t bytes, std::size_t values, const SourceLocation& where,
           const std::string& node, std::vector<Diagnostic>& problems) {
  if (budget.exceeded) return false;
  budget.bytes += bytes;
  budget.values += values;
  if (!budget.over()) return true;
  budget.exceeded = true;
  problems.push_back(Diagnostic{where, node, cat("variables expand to more than ", kMaxExpansionBytes, " bytes of text or ",
                                                 kMaxExpansionValues, " values (variables naming variables more than once "
                                                 "multiply); substitution stopped here")});
  return false;
}

// Substitutes in place; reports unknown names and text past the budget.
// Where values from overrides land: the overridden variables and the uses found so far.
struct OverrideTrail {
  const std::map<std::string, std::string>& origins;
  std::vector<GraphSpec::OverrideUse>* uses;  // null: not recorded (variables resolving)
  std::vector<std::string> used;              // the overridden variables substituted, in order
};

void substitute(Value& v, const std::map<std::string, const Value*>& vars, const std::string& node,
                std::vector<Diagnostic>& problems, ExpansionBudget& budget, OverrideTrail& trail) {
  if (budget.exceeded) return;
  if (v.is_list()) {
    Value::List items = v.as_list();
    for (auto& item : items) substitute(item, vars, node, problems, budget, trail);
    SourceLocation w = v.where();
    v = Value::list(std::move(items));
    v.at(w);
    return;
  }
  if (v.is_map()) {
    for (const auto& [k, item] : Value::Map(v.as_map())) {
      Value copy = item;
      substitute(copy, vars, node, problems, budget, trail);
      v.set(k, copy);
    }
    return;
  }
  if (!v.is_string() || v.as_string().find("${") == std::string::npos) return;
  const std::string text = v.as_string();
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t open = text.find("${", pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    std::size_t close = text.find('}', open);
    if (close == std::string::npos) {
      problems.push_back(Diagnostic{v.where(), node, cat("unterminated ${ in '", text, "'")});
      return;
    }
    std::string name = text.substr(open + 2, close - open - 2);
    if (auto o = trail.origins.find(name); o != trail.origins.end()) {
      trail.used.push_back(name);
      if (trail.uses) trail.uses->push_back({v.where(), name, o->second});
    }
    auto it = vars.find(name);
    if (it == vars.end()) {
      std::vector<std::string> names;
      for (const auto& kv : vars) names.push_back(kv.first);
      problems.push_back(Diagnostic{v.where(), node, cat("unknown variable '${", name, "}'", did_you_mean(name, names),
                                                         " (declare it under vars:)")});
      return;
    }
    if (open == 0 && close == text.size() - 1) {  // the whole value: keep the variable's type
      ExpansionBudget size;
      add_size(*it->second, size);
      if (!spend(budget, size.bytes, size.values, v.where(), node, problems)) return;
      SourceLocation w = v.where();
      v = *it->second;
      v.at(w);
      return;
    }
    const std::string value = it->second->is_string() ? it->second->as_string() : it->second->str();
    if (!spend(budget, open - pos + value.size(), 0, v.where(), node, problems)) return;
    out += text.substr(pos, open - pos);
    out += value;
    pos = close + 1;
  }
  SourceLocation w = v.where();
  v = Value::string(out);
  v.at(w);
}

// The names "${name}" refers to anywhere inside `v`.
void referenced_vars(const Value& v, std::vector<std::string>& names) {
  if (v.is_list()) {
    for (const auto& item : v.as_list()) referenced_vars(item, names);
  } else if (v.is_map()) {
    for (const auto& [k, item] : v.as_map()) referenced_vars(item, names);
  } else if (v.is_string()) {
    const std::string& text = v.as_string();
    for (std::size_t open = text.find("${"); open != std::string::npos; open = text.find("${", open + 2)) {
      const std::size_t close = text.find('}', open);
      if (close == std::string::npos) return;
      names.push_back(text.substr(open + 2, close - open - 2));
    }
  }
}

// Variables may refer to other variables (`ckpt: "${out}/tc1/ckpt"`): each is resolved after the
// ones it names, depth first; a cycle is a problem naming its members, located at the variable.
// A chain deeper than kMaxVariableDepth is a problem too (and keeps the recursion bounded).
constexpr std::size_t kMaxVariableDepth = 64;
void resolve_vars(GraphSpec& spec, std::vector<Diagnostic>& problems, ExpansionBudget& budget) {
  std::map<std::string, Value*> by_name;
  for (auto& [name, v] : spec.vars) by_name[name] = &v;
  std::map<std::string, int> state;  // 1 resolving, 2 done
  std::vector<std::string> path;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    auto it = by_name.find(name);
    if (it == by_name.end() || state[name] == 2) return;
    if (state[name] == 1) {
      std::string cycle;
      auto from = std::find(path.begin(), path.end(), name);
      for (; from != path.end(); ++from) cycle += *from + " -> ";
      problems.push_back(Diagnostic{it->second->where(), "", cat("variables refer to each other in a cycle: ", cycle, name)});
      *it->second = Value::string("");  // reported; resolve the rest without it
      state[name] = 2;
      return;
    }
    if (path.size() >= kMaxVariableDepth) {
      problems.push_back(Diagnostic{it->second->where(), "",
                                    cat("variable '", name, "' is reached through more than ", kMaxVariableDepth,
                                        " variables referring to one another")});
      *it->second = Value::string("");
      state[name] = 2;
      return;
    }
    state[name] = 1;
    path.push_back(name);
    std::vector<std::string> refs;
    referenced_vars(*it->second, refs);
    for (const auto& r : refs) visit(r);
    if (state[name] == 1) {
      std::map<std::string, const Value*> vars;
      for (const auto& [n, v] : by_name) vars[n] = v;
      OverrideTrail trail{spec.var_origins, nullptr, {}};
      substitute(*it->second, vars, "", problems, budget, trail);
      // A variable made from an overridden one carries the override on (`ckpt: "${out}/ckpt"`).
      if (!trail.used.empty() && !spec.var_origins.count(name)) spec.var_origins[name] = spec.var_origins.at(trail.used.front());
    }
    path.pop_back();
    state[name] = 2;
  };
  for (const auto& [name, v] : spec.vars) visit(name);
}

}  // namespace

bool apply_vars(GraphSpec& spec, std::vector<Diagnostic>& problems) {
  ExpansionBudget budget;
  resolve_vars(spec, problems, budget);
  std::map<std::string, const Value*> vars;
  for (const auto& [name, v] : spec.vars) vars[name] = &v;
  spec.override_uses.clear();
  OverrideTrail trail{spec.var_origins, &spec.override_uses, {}};
  substitute(spec.out, vars, "", problems, budget, trail);
  for (auto& n : spec.nodes) {
    substitute(n.params, vars, n.id, problems, budget, trail);
    substitute(n.cache, vars, n.id, problems, budget, trail);
    substitute(n.enabled, vars, n.id, problems, budget, trail);
    if (!budget.exceeded && !n.enabled.is_null() && !n.enabled.is_boolean())
      problems.push_back(Diagnostic{n.enabled.where(), n.id, cat("enabled must be true or false, got ", n.enabled.str())});
  }
  return !budget.exceeded;
}

void name_override_origins(const GraphSpec& spec, std::vector<Diagnostic>& problems, std::size_t first) {
  if (spec.override_uses.empty()) return;
  for (std::size_t i = first; i < problems.size(); ++i) {
    Diagnostic& d = problems[i];
    if (!d.where.known() || d.where.line == 0) continue;
    std::string origins, uses;
    for (const auto& u : spec.override_uses) {
      if (u.at.file != d.where.file || u.at.line != d.where.line || u.at.column != d.where.column) continue;
      if (origins.find(u.origin) == std::string::npos) origins += (origins.empty() ? "" : ", ") + u.origin;
      uses += cat(uses.empty() ? "" : ", ", "${", u.var, "}");
    }
    if (origins.empty()) continue;
    d.message += cat(" (", uses, " at ", d.where.str(), ")");
    d.where = SourceLocation{origins, 0, 0};
  }
}

}  // namespace embedflow::engine

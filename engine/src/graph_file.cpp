#include "embedflow_engine/graph_file.hpp"

#include <embedflow/suggest.hpp>
#include <embedflow/yaml.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "graph_parser.hpp"

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

GraphSpec parse_graph_text(const std::string& text, const std::string& file_name, std::vector<Diagnostic>& problems) {
  GraphSpec g;
  g.file = file_name;
  const std::optional<YAML::Node> root = detail::load_yaml_document(text, file_name, problems);
  if (!root) return g;
  detail::Parser p{file_name, problems, YamlBudget{}, {}};
  g = p.parse(*root, text);
  if (p.budget.values > kMaxYamlValues || p.budget.bytes > kMaxYamlBytes) {
    // The limit's problem says it all: what was left unread would only add follow-on problems.
    GraphSpec empty;
    empty.file = file_name;
    return empty;
  }
  detail::expand_subgraphs(g, p.subgraphs, problems);
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

// "${name}" in one scalar: the whole value takes the variable's value and type, a part of a longer
// string its text; unknown names and text past the budget are problems.
void substitute_scalar(Value& v, const std::map<std::string, const Value*>& vars, const std::string& node,
                       std::vector<Diagnostic>& problems, ExpansionBudget& budget, OverrideTrail& trail) {
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

// Substitutes in every scalar of `v`; past the budget, what is left stays as written.
void substitute(Value& v, const std::map<std::string, const Value*>& vars, const std::string& node,
                std::vector<Diagnostic>& problems, ExpansionBudget& budget, OverrideTrail& trail) {
  detail::rewrite_scalars(v, [&](Value& scalar) {
    if (!budget.exceeded) substitute_scalar(scalar, vars, node, problems, budget, trail);
  });
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

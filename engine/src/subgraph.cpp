// Subgraph expansion: a node whose type names a subgraph becomes the subgraph's nodes, as
// MediaPipe expands subgraphs and a GStreamer bin holds elements. Ids inside are prefixed with
// the instance's ("eval_tc1__ret"), the instance's parameters are substituted where the body
// says "${name}", and edges to or from the instance's ports are rewired to the ports inside.
// What comes out is a plain graph: validation, caches and the recorded graph see only nodes.
#include <embedflow/suggest.hpp>

#include <algorithm>
#include <map>

#include "graph_parser.hpp"

namespace embedflow::engine::detail {
namespace {

constexpr std::size_t kMaxSubgraphDepth = 16;
constexpr const char* kSeparator = "__";

// Where an endpoint written in one scope (the graph, or a subgraph body) lands once expanded.
struct Expanded {
  std::map<std::string, std::vector<PortEnd>> inputs;  // instance port -> the ports it feeds
  std::map<std::string, PortEnd> outputs;               // instance port -> the port it reads
  const SubgraphDef* def = nullptr;
  SourceLocation where;
};
using Scope = std::map<std::string, Expanded>;  // instance id as written -> its expansion

// "${p}" -> the parameter's value in `v`: the whole value keeps the parameter's type, a part of a
// longer string takes its text. Names that are not parameters are left for the graph's vars.
void substitute_param_text(Value& v, const std::map<std::string, Value>& params) {
  if (!v.is_string() || v.as_string().find("${") == std::string::npos) return;
  const std::string text = v.as_string();
  std::string out;
  std::size_t pos = 0;
  for (std::size_t open = text.find("${"); open != std::string::npos; open = text.find("${", pos)) {
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    auto it = params.find(text.substr(open + 2, close - open - 2));
    if (it == params.end()) {
      out += text.substr(pos, close + 1 - pos);
    } else if (open == 0 && close == text.size() - 1) {
      const SourceLocation w = v.where();
      v = it->second;
      v.at(w);
      return;
    } else {
      out += text.substr(pos, open - pos);
      out += it->second.is_string() ? it->second.as_string() : it->second.str();
    }
    pos = close + 1;
  }
  out += text.substr(std::min(pos, text.size()));
  const SourceLocation w = v.where();
  v = Value::string(out);
  v.at(w);
}

void substitute_params(Value& v, const std::map<std::string, Value>& params) {
  rewrite_scalars(v, [&](Value& scalar) { substitute_param_text(scalar, params); });
}

class Expander {
 public:
  Expander(const std::vector<SubgraphDef>& defs, std::vector<Diagnostic>& problems) : problems_(problems) {
    for (const auto& d : defs) defs_.emplace(d.name, &d);
  }

  // Expands the graph's own nodes and edges into `out`.
  void expand_graph(GraphSpec& g) {
    std::vector<NodeSpec> nodes;
    std::vector<EdgeSpec> edges;
    Scope scope;
    expand_scope(g.nodes, g.edges, "", {}, {}, scope, nodes, edges);
    if (over_) {
      g.nodes.clear();
      g.edges.clear();
      return;
    }
    g.nodes = std::move(nodes);
    g.edges = std::move(edges);
    refuse_repeated_ids(g);
  }

 private:
  bool is_instance(const NodeSpec& n) const { return !n.type.empty() && n.type.find('.') == std::string::npos; }

  // The nodes and edges of one scope (ids as written), expanded with `prefix` into `nodes` and
  // `edges`; instances found are listed in `scope` with their ports.
  void expand_scope(const std::vector<NodeSpec>& in_nodes, const std::vector<EdgeSpec>& in_edges, const std::string& prefix,
                    const std::vector<SubgraphUse>& within, const std::map<std::string, Value>& params, Scope& scope,
                    std::vector<NodeSpec>& nodes, std::vector<EdgeSpec>& edges) {
    for (const NodeSpec& written : in_nodes) {
      if (over_) return;
      NodeSpec n = written;
      substitute_params(n.params, params);
      substitute_params(n.cache, params);
      substitute_params(n.enabled, params);
      if (!is_instance(n)) {
        n.id = prefix + n.id;
        n.within = within;
        nodes.push_back(std::move(n));
        if (nodes.size() > kMaxGraphNodes) too_many(written);
        continue;
      }
      auto def = defs_.find(n.type);
      if (def == defs_.end() || def->second->unreadable) {
        if (def == defs_.end()) unknown_subgraph(n, prefix);
        n.id = prefix + n.id;
        if (def != defs_.end() || !defs_.empty()) n.type.clear();  // reported: validation adds no second message
        nodes.push_back(std::move(n));
        continue;
      }
      scope[written.id] = instantiate(n, *def->second, prefix, within, nodes, edges);
    }
    for (const EdgeSpec& e : in_edges) rewire(e, prefix, within, scope, edges);
  }

  Expanded instantiate(const NodeSpec& use, const SubgraphDef& def, const std::string& prefix,
                       const std::vector<SubgraphUse>& within, std::vector<NodeSpec>& nodes, std::vector<EdgeSpec>& edges) {
    Expanded out;
    out.def = &def;
    out.where = use.where;
    const std::string id = prefix + use.id;
    if (!enter(def, use, id, within)) return out;
    std::map<std::string, Value> params = instance_params(use, def, id);
    std::vector<SubgraphUse> inner_within = within;
    inner_within.push_back(SubgraphUse{id, def.name, use.where, def.where});
    const std::size_t first_node = nodes.size();
    Scope inner;
    expand_scope(def.body.nodes, def.body.edges, id + kSeparator, inner_within, params, inner, nodes, edges);
    stack_.pop_back();
    // An instance's `enabled` reaches every node inside that does not say otherwise.
    if (!use.enabled.is_null())
      for (std::size_t i = first_node; i < nodes.size(); ++i)
        if (nodes[i].enabled.is_null()) nodes[i].enabled = use.enabled;
    const std::string inner_prefix = id + kSeparator;
    for (const auto& port : def.inputs)
      for (const auto& end : port.ends)
        for (const auto& target : inside_targets(end, inner_prefix, inner, port.where, id)) {
          // Ports listing ports of nested instances multiply: bounded like the edges they become.
          if (over_ || out.inputs[port.name].size() >= kMaxGraphEdges) {
            if (!over_) problems_.push_back(Diagnostic{port.where, id, cat("subgraph input '", port.name, "' feeds more than ",
                                                                           kMaxGraphEdges, " ports")});
            over_ = true;
            return out;
          }
          out.inputs[port.name].push_back(target);
        }
    for (const auto& port : def.outputs)
      if (!port.ends.empty())
        if (auto source = inside_source(port.ends.front(), inner_prefix, inner, port.where, id))
          out.outputs[port.name] = *source;
    return out;
  }

  // Pushes `def` on the expansion stack; false (reported) when it would recurse.
  bool enter(const SubgraphDef& def, const NodeSpec& use, const std::string& id, const std::vector<SubgraphUse>& within) {
    if (std::find(stack_.begin(), stack_.end(), def.name) != stack_.end() || stack_.size() >= kMaxSubgraphDepth) {
      std::string chain;
      for (const auto& s : stack_) chain += s + " -> ";
      problems_.push_back(Diagnostic{use.type_where, id,
                                     stack_.size() >= kMaxSubgraphDepth
                                         ? cat("subgraphs nest more than ", kMaxSubgraphDepth, " deep (", chain, def.name, ")")
                                         : cat("subgraph '", def.name, "' contains itself (", chain, def.name, ")")});
      name_uses(problems_.back(), within);
      return false;
    }
    stack_.push_back(def.name);
    return true;
  }

  // The instance's parameters: its `params` over the subgraph's defaults; unknown and missing
  // ones are problems at the use site.
  std::map<std::string, Value> instance_params(const NodeSpec& use, const SubgraphDef& def, const std::string& id) {
    std::map<std::string, Value> params;
    std::vector<std::string> names;
    for (const auto& [name, value] : def.params) {
      params[name] = value;
      names.push_back(name);
    }
    if (use.params.is_map())
      for (const auto& [k, v] : use.params.as_map()) {
        if (!params.count(k)) {
          problems_.push_back(Diagnostic{v.where().known() ? v.where() : use.where, id,
                                         cat("subgraph '", def.name, "' has no parameter '", k, "'", did_you_mean(k, names),
                                             names.empty() ? " (it takes none)" : cat(" (parameters: ", join(names), ")"))});
          continue;
        }
        params[k] = v;
      }
    for (const auto& [name, value] : def.params)
      if (value.is_null() && !(use.params.is_map() && use.params.get(name)))
        problems_.push_back(Diagnostic{use.where, id, cat("subgraph '", def.name, "' needs parameter '", name, "' (declared at ",
                                                          value.where().str(), ")")});
    if (!use.cache.is_null() || use.in_flight != 0)
      problems_.push_back(Diagnostic{use.where, id, cat("a subgraph instance takes type, params, enabled and doc; "
                                                        "cache and in_flight belong to the nodes inside '", def.name, "'")});
    return params;
  }

  // A port end written inside a body, as the expanded ports it stands for.
  std::vector<PortEnd> inside_targets(const PortEnd& end, const std::string& prefix, const Scope& inner,
                                      const SourceLocation& where, const std::string& id) {
    auto nested = inner.find(end.node);
    if (nested == inner.end()) return {PortEnd{prefix + end.node, end.port}};
    auto port = instance_port(nested->second, end.port, true, where, id, end.node);
    return port ? nested->second.inputs.at(*port) : std::vector<PortEnd>{};
  }
  std::optional<PortEnd> inside_source(const PortEnd& end, const std::string& prefix, const Scope& inner,
                                       const SourceLocation& where, const std::string& id) {
    auto nested = inner.find(end.node);
    if (nested == inner.end()) return PortEnd{prefix + end.node, end.port};
    auto port = instance_port(nested->second, end.port, false, where, id, end.node);
    if (!port) return std::nullopt;
    return nested->second.outputs.at(*port);
  }

  // The instance port `port` names (the only one when empty); nullopt (reported) when none.
  std::optional<std::string> instance_port(const Expanded& x, const std::string& port, bool input, const SourceLocation& where,
                                           const std::string& node, const std::string& instance) {
    if (!x.def) return std::nullopt;  // reported where it was instantiated
    const auto& ports = input ? x.def->inputs : x.def->outputs;
    std::vector<std::string> names;
    for (const auto& p : ports) names.push_back(p.name);
    const char* dir = input ? "input" : "output";
    // A declared port whose own target did not resolve has no ends (reported inside the body).
    auto resolved = [&](const std::string& name) { return input ? x.inputs.count(name) > 0 : x.outputs.count(name) > 0; };
    if (port.empty() && names.size() == 1) return resolved(names.front()) ? std::optional<std::string>(names.front()) : std::nullopt;
    if (port.empty()) {
      problems_.push_back(Diagnostic{where, node, cat("subgraph instance '", instance, "' (", x.def->name, ") has ",
                                                      names.empty() ? "no " : "several ", dir, "s",
                                                      names.empty() ? "" : cat(": name one of ", join(names)))});
      return std::nullopt;
    }
    const bool known = std::find(names.begin(), names.end(), port) != names.end();
    const bool has_ends = resolved(port);
    if (known && has_ends) return port;
    if (!known)
      problems_.push_back(Diagnostic{where, node, cat("subgraph instance '", instance, "' (", x.def->name, ") has no ", dir,
                                                      " port '", port, "'", did_you_mean(port, names),
                                                      names.empty() ? "" : cat(" (", dir, "s: ", join(names), ")"))});
    return std::nullopt;
  }

  // An edge written in a scope: its ends mapped through instances; one edge per port an instance
  // input feeds.
  void rewire(const EdgeSpec& e, const std::string& prefix, const std::vector<SubgraphUse>& within, const Scope& scope,
              std::vector<EdgeSpec>& edges) {
    if (over_) return;
    std::vector<PortEnd> sources, targets;
    if (auto x = scope.find(e.from_node); x != scope.end()) {
      if (auto port = instance_port(x->second, e.from_port, false, e.where, prefix + e.from_node, e.from_node))
        sources.push_back(x->second.outputs.at(*port));
    } else {
      sources.push_back(PortEnd{prefix + e.from_node, e.from_port});
    }
    if (auto x = scope.find(e.to_node); x != scope.end()) {
      if (auto port = instance_port(x->second, e.to_port, true, e.where, prefix + e.to_node, e.to_node))
        targets = x->second.inputs.at(*port);
    } else {
      targets.push_back(PortEnd{prefix + e.to_node, e.to_port});
    }
    for (const auto& from : sources)
      for (const auto& to : targets) {
        if (over_) return;
        EdgeSpec out = e;
        out.from_node = from.node;
        out.from_port = from.port;
        out.to_node = to.node;
        out.to_port = to.port;
        out.text = cat(from.node, from.port.empty() ? "" : ".", from.port, " -> ", to.node, to.port.empty() ? "" : ".", to.port);
        out.within = within;
        edges.push_back(std::move(out));
        if (edges.size() > kMaxGraphEdges) too_many_edges(e);
      }
  }

  void unknown_subgraph(const NodeSpec& n, const std::string& prefix) {
    if (defs_.empty()) return;  // no subgraphs: validation's "unknown node type" says it
    std::vector<std::string> names;
    for (const auto& [name, def] : defs_) names.push_back(name);
    problems_.push_back(Diagnostic{n.type_where, prefix + n.id,
                                   cat("unknown node type or subgraph '", n.type, "'", did_you_mean(n.type, names),
                                       " (subgraphs: ", join(names), "; node types are family.name)")});
  }

  void too_many(const NodeSpec& at) {
    if (!over_) problems_.push_back(Diagnostic{at.where, "", cat("subgraphs expand to more than ", kMaxGraphNodes, " nodes")});
    over_ = true;
  }
  void too_many_edges(const EdgeSpec& at) {
    if (!over_) problems_.push_back(Diagnostic{at.where, "", cat("subgraphs expand to more than ", kMaxGraphEdges, " edges")});
    over_ = true;
  }

  // An expanded id that another node already has ("a__b" written by hand beside instance a's b).
  void refuse_repeated_ids(const GraphSpec& g) {
    std::map<std::string, const NodeSpec*> seen;
    for (const auto& n : g.nodes) {
      auto [it, fresh] = seen.emplace(n.id, &n);
      if (fresh || (n.within.empty() && it->second->within.empty())) continue;  // the parser reported plain repeats
      const NodeSpec* made = n.within.empty() ? it->second : &n;
      const NodeSpec* other = made == &n ? it->second : &n;
      problems_.push_back(Diagnostic{other->where, n.id, cat("node id '", n.id, "' is also made by subgraph instance '",
                                                             made->within.back().instance, "' at ",
                                                             made->within.back().used_at.str())});
    }
  }

  static std::string join(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

 public:
  static void name_uses(Diagnostic& d, const std::vector<SubgraphUse>& within) {
    for (auto u = within.rbegin(); u != within.rend(); ++u)
      d.message += cat(" (in subgraph '", u->subgraph, "' at ", u->defined_at.str(), ", used as '", u->instance, "' at ",
                       u->used_at.str(), ")");
  }

 private:
  std::map<std::string, const SubgraphDef*> defs_;
  std::vector<Diagnostic>& problems_;
  std::vector<std::string> stack_;  // subgraphs being expanded, outermost first
  bool over_ = false;
};

}  // namespace

void expand_subgraphs(GraphSpec& g, const std::vector<SubgraphDef>& defs, std::vector<Diagnostic>& problems) {
  bool any = !defs.empty();
  for (const auto& n : g.nodes) any = any || (!n.type.empty() && n.type.find('.') == std::string::npos);
  if (!any) return;  // nothing to expand: the graph stays exactly as parsed
  Expander(defs, problems).expand_graph(g);
}

}  // namespace embedflow::engine::detail

namespace embedflow::engine {

void name_subgraph_uses(const GraphSpec& spec, std::vector<Diagnostic>& problems, std::size_t first) {
  for (std::size_t i = first; i < problems.size(); ++i) {
    Diagnostic& d = problems[i];
    if (d.message.find(" (in subgraph '") != std::string::npos) continue;  // named where it was found
    const std::vector<SubgraphUse>* within = nullptr;
    if (const NodeSpec* n = d.node.empty() ? nullptr : spec.node(d.node); n && !n->within.empty()) within = &n->within;
    for (const auto& e : spec.edges) {
      if (within) break;
      if (!e.within.empty() && e.where.line == d.where.line && e.where.file == d.where.file &&
          d.message.find("edge '" + e.text + "'") != std::string::npos)
        within = &e.within;
    }
    if (within) detail::Expander::name_uses(d, *within);
  }
}

}  // namespace embedflow::engine

#include "embedflow_engine/graph.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "embedflow/node_check.hpp"
#include "embedflow/suggest.hpp"

namespace embedflow::engine {

namespace {

std::string port_list(const std::vector<PortSpec>& ports) {
  std::string s;
  for (const auto& p : ports) s += (s.empty() ? "" : ", ") + p.name;
  return s.empty() ? "none" : s;
}

std::vector<std::string> names_of(const std::vector<PortSpec>& ports) {
  std::vector<std::string> v;
  for (const auto& p : ports) v.push_back(p.name);
  return v;
}

}  // namespace

std::string node_origin(const ResolvedGraph& g, std::size_t i) {
  const ResolvedNode& n = g.nodes[i];
  std::string s = n.spec->where.known() ? n.spec->where.str() + ": " : "";
  return s + cat("node '", n.id(), "' (", n.type ? n.type->name : n.spec->type, ")");
}

namespace {

// `cache: true|false` or a map validated like parameters, so typos get a located "did you mean".
CacheSettings parse_cache_settings(const NodeSpec& ns, std::vector<Diagnostic>& problems) {
  CacheSettings out;
  if (ns.cache.is_null()) return out;
  if (ns.cache.is_boolean()) {
    out.enabled = ns.cache.as_boolean();
    return out;
  }
  static const std::vector<ParamSpec> specs{
      Param::boolean("enabled").default_value(true).doc("false keeps the options but runs uncached"),
      Param::choice("hash", {"fast", "full"}).default_value("fast")
          .doc("fast: input files by size, mtime and sampled blocks; full: every byte"),
      Param::integer("compression").default_value(0).range(0, 9).doc("deflate level of the cache file")};
  Params p;
  validate_params(specs, ns.cache, nullptr, p, problems, ns.id);
  if (p.has("enabled")) out.enabled = p.boolean("enabled");
  if (p.has("hash")) out.full_hash = p.string("hash") == "full";
  if (p.has("compression")) out.compression = static_cast<int>(p.integer("compression"));
  return out;
}

// The input an edge that names no port goes to: a node's only input, or its only input that
// must be connected (adding an optional input to a type, as torch.train's `validation`, keeps
// `a -> train` meaning `in`); -1 when that is ambiguous.
int default_input(const NodeType& t) {
  if (t.inputs.size() == 1) return 0;
  int found = -1;
  for (std::size_t i = 0; i < t.inputs.size(); ++i) {
    if (t.inputs[i].optional) continue;
    if (found >= 0) return -1;
    found = static_cast<int>(i);
  }
  return found;
}

// Leaves out nodes with `enabled: false`, and then, until nothing changes, every node with an
// input port whose edges all come from left-out nodes (a disabled branch takes its downstream
// with it; a node fed by several branches on one port keeps the live ones). Optional ports count
// too: a node wired to a left-out producer would otherwise change meaning silently (a retrieval
// whose gallery vanished would turn into self-retrieval). Edges touching a left-out node go too.
// Names are recorded in spec.disabled.
void prune_disabled(GraphSpec& spec, const Registry& registry) {
  std::set<std::string> out;
  for (const auto& n : spec.nodes)
    if (n.enabled.is_boolean() && !n.enabled.as_boolean()) out.insert(n.id);
  if (out.empty()) return;
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& n : spec.nodes) {
      if (out.count(n.id)) continue;
      const NodeType* t = registry.node_type(n.type);
      if (!t) continue;
      const int unnamed = default_input(*t);
      for (std::size_t i = 0; i < t->inputs.size(); ++i) {
        const auto& port = t->inputs[i];
        bool any = false, all_out = true;
        for (const auto& e : spec.edges) {
          if (e.to_node != n.id) continue;
          if (!(e.to_port == port.name || (e.to_port.empty() && unnamed == static_cast<int>(i)))) continue;
          any = true;
          if (!out.count(e.from_node)) all_out = false;
        }
        if (any && all_out) {
          out.insert(n.id);
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<NodeSpec> nodes;
  for (auto& n : spec.nodes) {
    if (out.count(n.id)) spec.disabled.push_back(n.id);
    else nodes.push_back(std::move(n));
  }
  spec.nodes = std::move(nodes);
  std::vector<EdgeSpec> edges;
  for (auto& e : spec.edges)
    if (!out.count(e.from_node) && !out.count(e.to_node)) edges.push_back(std::move(e));
  spec.edges = std::move(edges);
}

}  // namespace

namespace {

using NodeIndex = std::map<std::string, std::size_t>;

// Types and parameters: one ResolvedNode per node, its ports sized by its type. Returns false
// when a node's type is unknown (reported here unless the node names none).
bool resolve_types(ResolvedGraph& g, const Registry& registry, NodeIndex& index, std::vector<Diagnostic>& problems) {
  std::vector<std::string> type_names = registry.node_type_names();
  bool types_ok = true;
  for (const NodeSpec& ns : g.spec.nodes) {
    ResolvedNode rn;
    rn.spec = &ns;
    rn.seed = derive_seed(g.spec.seed, ns.id);
    rn.type = ns.type.empty() ? nullptr : registry.node_type(ns.type);
    if (!rn.type) {
      types_ok = false;
      if (!ns.type.empty()) {
        problems.push_back(Diagnostic{ns.type_where, ns.id,
                                      cat("unknown node type '", ns.type, "'", did_you_mean(ns.type, type_names),
                                          " (embedflow inspect lists the types)")});
      }
    } else {
      validate_params(rn.type->params, ns.params, &registry, rn.params, problems, ns.id);
      rn.cache = parse_cache_settings(ns, problems);
      rn.input_schemas.resize(rn.type->inputs.size());
      rn.output_schemas.resize(rn.type->outputs.size());
      rn.in_edges.resize(rn.type->inputs.size());
      rn.out_edges.resize(rn.type->outputs.size());
    }
    index[ns.id] = g.nodes.size();
    g.nodes.push_back(std::move(rn));
  }
  return types_ok;
}

// Binds one end of edge `es` to a node and port; false (reported, unless the node's type was
// already) when the node or the port does not exist or an unnamed port is ambiguous.
bool bind_endpoint(const ResolvedGraph& g, const NodeIndex& index, const std::vector<std::string>& ids,
                   const EdgeSpec& es, const std::string& node_id, const std::string& port, bool output, PortRef& ref,
                   std::vector<Diagnostic>& problems) {
  auto it = index.find(node_id);
  if (it == index.end()) {
    problems.push_back(Diagnostic{es.where, "", cat("edge '", es.text, "': no node '", node_id, "'",
                                                    did_you_mean(node_id, ids))});
    return false;
  }
  ref.node = it->second;
  const ResolvedNode& rn = g.nodes[ref.node];
  if (!rn.type) return false;  // already reported
  const auto& ports = output ? rn.type->outputs : rn.type->inputs;
  const char* dir = output ? "output" : "input";
  if (port.empty()) {
    const int unnamed = output ? (ports.size() == 1 ? 0 : -1) : default_input(*rn.type);
    if (unnamed >= 0) {
      ref.port = static_cast<std::size_t>(unnamed);
    } else {
      problems.push_back(Diagnostic{es.where, node_id, cat("edge '", es.text, "': name the ", dir, " port; ",
                                                           rn.type->name, " has ", dir, "s: ", port_list(ports))});
      return false;
    }
    return true;
  }
  int i = output ? rn.type->output_index(port) : rn.type->input_index(port);
  if (i < 0) {
    const auto& other = output ? rn.type->inputs : rn.type->outputs;
    bool wrong_way = std::any_of(other.begin(), other.end(), [&](const PortSpec& p) { return p.name == port; });
    problems.push_back(Diagnostic{
        es.where, node_id,
        cat("edge '", es.text, "': ", rn.type->name, " has no ", dir, " port '", port, "'",
            wrong_way ? cat(" ('", port, "' is an ", output ? "input" : "output", ")") : "",
            did_you_mean(port, names_of(ports)), " (", dir, "s: ", port_list(ports), ")")});
    return false;
  }
  ref.port = static_cast<std::size_t>(i);
  return true;
}

// Edges: each bound to its ports and listed on both nodes; self-loops and repeats are reported.
void resolve_edges(ResolvedGraph& g, const NodeIndex& index, std::vector<Diagnostic>& problems) {
  std::vector<std::string> ids;
  for (const auto& n : g.spec.nodes) ids.push_back(n.id);
  std::set<std::pair<std::pair<std::size_t, std::size_t>, std::pair<std::size_t, std::size_t>>> seen;
  for (const EdgeSpec& es : g.spec.edges) {
    if (es.from_node == es.to_node) {
      problems.push_back(Diagnostic{es.where, es.from_node, cat("edge '", es.text, "' connects the node to itself")});
      continue;
    }
    ResolvedEdge e;
    e.spec = &es;
    bool ok_from = bind_endpoint(g, index, ids, es, es.from_node, es.from_port, true, e.from, problems);
    bool ok_to = bind_endpoint(g, index, ids, es, es.to_node, es.to_port, false, e.to, problems);
    if (!ok_from || !ok_to) continue;
    if (!seen.insert({{e.from.node, e.from.port}, {e.to.node, e.to.port}}).second) {
      problems.push_back(Diagnostic{es.where, "", cat("edge '", es.text, "' is listed twice")});
      continue;
    }
    std::size_t idx = g.edges.size();
    g.nodes[e.from.node].out_edges[e.from.port].push_back(idx);
    g.nodes[e.to.node].in_edges[e.to.port].push_back(idx);
    g.edges.push_back(e);
  }
}

// Unconnected required inputs; side ports take at most one edge (a latch has one writer).
void check_input_edges(const ResolvedGraph& g, std::vector<Diagnostic>& problems) {
  for (const ResolvedNode& rn : g.nodes) {
    if (!rn.type) continue;
    for (std::size_t p = 0; p < rn.type->inputs.size(); ++p) {
      const PortSpec& port = rn.type->inputs[p];
      if (rn.in_edges[p].empty() && !port.optional)
        problems.push_back(Diagnostic{rn.spec->where, rn.id(),
                                      cat("input '", port.name, "' of ", rn.type->name, " is not connected",
                                          port.doc.empty() ? "" : " (" + port.doc + ")")});
      if (port.side && rn.in_edges[p].size() > 1)
        problems.push_back(Diagnostic{rn.spec->where, rn.id(), cat("side input '", port.name, "' has ", rn.in_edges[p].size(),
                                                                   " edges; a side port takes one")});
    }
  }
}

// Names one cycle exactly, among the nodes Kahn's sort left (`indegree` above 0). Those are on a
// cycle or downstream of one (a -> b -> a plus b -> out leaves out too); pruning, repeatedly,
// those with no edge to another left node keeps only nodes with a successor among them, so
// following edges from any of them must come back to a node already seen: that loop is a cycle
// and nothing else.
void report_cycle(const ResolvedGraph& g, const std::vector<std::size_t>& indegree, std::vector<Diagnostic>& problems) {
  std::vector<char> left(g.nodes.size(), 0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) left[i] = indegree[i] > 0;
  auto successors_left = [&](std::size_t i) {
    std::size_t n = 0;
    for (const auto& out : g.nodes[i].out_edges)
      for (std::size_t e : out) n += left[g.edges[e].to.node] != 0;
    return n;
  };
  for (bool pruned = true; pruned;) {
    pruned = false;
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (left[i] && successors_left(i) == 0) {
        left[i] = 0;
        pruned = true;
      }
  }
  std::size_t start = 0;
  while (!left[start]) ++start;
  std::vector<std::size_t> path{start};
  std::vector<const EdgeSpec*> via_edges;
  std::vector<int> pos(g.nodes.size(), -1);
  pos[start] = 0;
  for (;;) {
    const std::size_t cur = path.back();
    std::size_t next = cur;
    const EdgeSpec* via = nullptr;
    for (const auto& out : g.nodes[cur].out_edges)
      for (std::size_t e : out)
        if (left[g.edges[e].to.node] && !via) {
          next = g.edges[e].to.node;
          via = g.edges[e].spec;
        }
    via_edges.push_back(via);  // never null: every node left has a successor left
    if (pos[next] >= 0) {
      path.erase(path.begin(), path.begin() + pos[next]);
      via_edges.erase(via_edges.begin(), via_edges.begin() + pos[next]);
      path.push_back(next);
      break;
    }
    pos[next] = static_cast<int>(path.size());
    path.push_back(next);
  }
  std::string cycle, nodes_at, edges_at;
  for (std::size_t k = 0; k < path.size(); ++k) {
    const ResolvedNode& n = g.nodes[path[k]];
    cycle += (cycle.empty() ? "" : " -> ") + n.id();
    if (k + 1 < path.size()) {
      nodes_at += cat(nodes_at.empty() ? "" : ", ", n.id(), " at line ", n.spec->where.line);
      edges_at += cat(edges_at.empty() ? "" : ", ", "'", via_edges[k]->text, "' at line ", via_edges[k]->where.line);
    }
  }
  problems.push_back(Diagnostic{via_edges.front()->where, "",
                                cat("the graph has a cycle: ", cycle, " (nodes: ", nodes_at, "; edges: ", edges_at, ")")});
}

// Topological order (Kahn) into g.order; false, with one cycle reported, when the graph has one.
bool order_topologically(ResolvedGraph& g, std::vector<Diagnostic>& problems) {
  std::vector<std::size_t> indegree(g.nodes.size(), 0);
  for (const auto& e : g.edges) ++indegree[e.to.node];
  std::queue<std::size_t> ready;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (indegree[i] == 0) ready.push(i);
  while (!ready.empty()) {
    std::size_t i = ready.front();
    ready.pop();
    g.order.push_back(i);
    for (const auto& out : g.nodes[i].out_edges)
      for (std::size_t e : out)
        if (--indegree[g.edges[e].to.node] == 0) ready.push(g.edges[e].to.node);
  }
  if (g.order.size() == g.nodes.size()) return true;
  report_cycle(g, indegree, problems);
  return false;
}

// The type's check hook sees the node's resolved schemas and connections and may refine its
// output schemas.
void run_node_check(ResolvedNode& rn, const Registry& registry, std::vector<Diagnostic>& problems) {
  CheckedNode checked;
  checked.type = rn.type;
  checked.id = rn.id();
  checked.params = &rn.params;
  checked.written = &rn.spec->params;
  checked.where = rn.spec->where;
  checked.inputs = rn.input_schemas;
  checked.outputs = std::move(rn.output_schemas);
  for (const auto& edges : rn.in_edges) checked.input_connected.push_back(!edges.empty());
  for (const auto& edges : rn.out_edges) checked.output_connected.push_back(!edges.empty());
  run_check_hook(checked, registry, problems);
  rn.output_schemas = std::move(checked.outputs);
}

// Schemas, in topological order so every input's producer is already resolved: each input's
// declared schema unified with what its edges carry, outputs substituted, then the check hook.
void resolve_schemas(ResolvedGraph& g, const Registry& registry, std::vector<Diagnostic>& problems) {
  for (std::size_t i : g.order) {
    ResolvedNode& rn = g.nodes[i];
    auto param_ints = rn.params.integer_values();
    for (std::size_t p = 0; p < rn.type->inputs.size(); ++p) {
      PortSchema required = substitute(rn.type->inputs[p].schema, param_ints, {});
      rn.input_schemas[p] = required;
      for (std::size_t e : rn.in_edges[p]) {
        const ResolvedEdge& edge = g.edges[e];
        const PortSchema& produced = g.nodes[edge.from.node].output_schemas[edge.from.port];
        std::vector<std::string> found;
        unify(produced, required, rn.bindings, found);
        for (const auto& msg : found)
          problems.push_back(Diagnostic{edge.spec->where, rn.id(), cat("edge '", edge.spec->text, "': ", msg)});
        // What arrives is what the producer guarantees, when it says.
        if (!produced.is_any()) rn.input_schemas[p] = produced;
      }
    }
    for (std::size_t p = 0; p < rn.type->outputs.size(); ++p)
      rn.output_schemas[p] = substitute(rn.type->outputs[p].schema, param_ints, rn.bindings);
    if (rn.type->check) run_node_check(rn, registry, problems);
  }
}

ResolvedGraph resolve_named(GraphSpec spec, const Registry& registry, std::vector<Diagnostic>& problems) {
  ResolvedGraph g;
  if (!apply_vars(spec, problems)) {  // expansion past its budget: reported once, nothing further
    g.spec = std::move(spec);
    g.registry = &registry;
    return g;
  }
  prune_disabled(spec, registry);
  g.spec = std::move(spec);
  g.registry = &registry;
  NodeIndex index;
  const bool types_ok = resolve_types(g, registry, index, problems);
  resolve_edges(g, index, problems);
  check_input_edges(g, problems);
  if (!order_topologically(g, problems)) return g;
  if (types_ok) resolve_schemas(g, registry, problems);
  return g;
}

}  // namespace

ResolvedGraph resolve(GraphSpec spec, const Registry& registry, std::vector<Diagnostic>& problems) {
  const std::size_t first = problems.size();
  ResolvedGraph g = resolve_named(std::move(spec), registry, problems);
  name_override_origins(g.spec, problems, first);
  name_subgraph_uses(g.spec, problems, first);
  return g;
}

}  // namespace embedflow::engine

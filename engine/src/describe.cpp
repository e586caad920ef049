#include "embedflow_engine/describe.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace embedflow::engine {

static std::string range_text(const ParamSpec& p) {
  std::string s;
  if (p.min || p.max)
    s = cat("range [", p.min ? cat(*p.min) : std::string("-inf"), ", ", p.max ? cat(*p.max) : std::string("inf"), "]");
  if (!p.choices.empty()) {
    s = "one of {";
    for (std::size_t i = 0; i < p.choices.size(); ++i) s += (i ? ", " : "") + p.choices[i];
    s += "}";
  }
  if (!p.component_kind.empty()) s = "a " + p.component_kind + " component";
  return s;
}

static void print_params(std::ostream& out, const std::vector<ParamSpec>& params) {
  if (params.empty()) {
    out << "  (none)\n";
    return;
  }
  for (const auto& p : params) {
    out << "  " << std::left << std::setw(22) << p.name << " " << param_type_name(p.type);
    if (p.default_value) out << "  default " << p.default_value->str();
    else if (p.optional) out << "  optional";
    else out << "  REQUIRED";
    std::string r = range_text(p);
    if (!r.empty()) out << "  " << r;
    out << "\n";
    if (!p.doc.empty()) out << "      " << p.doc << "\n";
  }
}

void print_type_list(std::ostream& out, const Registry& registry, const std::vector<LoadedPlugin>& plugins) {
  out << "Plugins:\n";
  for (const auto& p : plugins)
    out << "  " << std::left << std::setw(10) << p.name << " " << std::setw(8) << p.version << " " << p.file
        << (p.libraries.empty() ? "" : "  [" + p.libraries + "]") << "\n";
  out << "\nNode types:\n";
  for (const NodeType* t : registry.node_types()) {
    std::string first_line = t->doc.substr(0, t->doc.find('\n'));
    out << "  " << std::left << std::setw(28) << t->name << " " << first_line << "\n";
  }
  out << "\nComponent types:\n";
  for (const ComponentType* t : registry.component_types()) {
    std::string first_line = t->doc.substr(0, t->doc.find('\n'));
    out << "  " << std::left << std::setw(28) << t->name << " [" << t->kind << "] " << first_line << "\n";
  }
}

void print_node_type(std::ostream& out, const NodeType& t) {
  out << t.name << "\n\n" << t.doc << "\n\n";
  out << "Plugin: " << t.plugin << " " << t.plugin_version << " (" << t.plugin_file << ")\n";
  out << "Kind: " << (t.source ? "source" : "node") << ", "
      << (t.concurrency == Concurrency::parallel ? "parallel-safe" : "serial")
      << (t.deterministic ? ", deterministic (output independent of the seed" +
                                (t.random_when.empty() ? std::string(")") : " unless " + t.random_when + " is true)")
                          : std::string())
      << "\n\n";
  out << "Parameters:\n";
  print_params(out, t.params);
  auto ports = [&](const char* title, const std::vector<PortSpec>& list) {
    out << "\n" << title << ":\n";
    if (list.empty()) out << "  (none)\n";
    for (const auto& p : list) {
      out << "  " << std::left << std::setw(14) << p.name << " " << (p.schema_text.empty() ? "*" : p.schema_text);
      if (p.side) out << "  [side]";
      if (p.optional) out << "  [optional]";
      out << "\n";
      if (!p.doc.empty()) out << "      " << p.doc << "\n";
    }
  };
  ports("Inputs", t.inputs);
  ports("Outputs", t.outputs);
  if (!t.example.empty()) out << "\nExample:\n" << t.example << (t.example.back() == '\n' ? "" : "\n");
}

void print_component_type(std::ostream& out, const ComponentType& t) {
  out << t.name << "  [component: " << t.kind << "]\n\n" << t.doc << "\n\n";
  out << "Plugin: " << t.plugin << " " << t.plugin_version << " (" << t.plugin_file << ")\n\nParameters:\n";
  print_params(out, t.params);
  if (t.contract.empty() && !t.check) return;
  out << "\nContract:\n";
  for (const ContractSpec& c : t.contract) {
    switch (c.kind) {
      case ContractSpec::Kind::consumes: out << "  consumes from " << c.input << ": " << c.schema_text << "\n"; break;
      case ContractSpec::Kind::one_of: out << "  consumes from " << c.input << " one of: " << c.schema_text << "\n"; break;
      case ContractSpec::Kind::produces: out << "  produces: " << c.schema_text << "\n"; break;
    }
  }
  if (t.check) out << "  (refined at graph load from its parameters and parts)\n";
}

using json = nlohmann::ordered_json;

// A parameter value as typed JSON: a default of 0.5 is the number 0.5, true the boolean.
static json value_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::null: return nullptr;
    case Value::Kind::boolean: return v.as_boolean();
    case Value::Kind::integer: return v.as_integer();
    case Value::Kind::number: return std::isfinite(v.as_number()) ? json(v.as_number()) : json(nullptr);
    case Value::Kind::string: return v.as_string();
    case Value::Kind::list: {
      json a = json::array();
      for (const Value& item : v.as_list()) a.push_back(value_json(item));
      return a;
    }
    case Value::Kind::map: {
      json o = json::object();
      for (const auto& [k, item] : v.as_map()) o[k] = value_json(item);
      return o;
    }
  }
  return nullptr;
}

static json params_json(const std::vector<ParamSpec>& params) {
  json a = json::array();
  for (const ParamSpec& p : params) {
    json j = {{"name", p.name}, {"type", param_type_name(p.type)}, {"doc", p.doc}};
    if (p.default_value) j["default"] = value_json(*p.default_value);
    j["required"] = p.required();
    if (p.min) j["min"] = *p.min;
    if (p.max) j["max"] = *p.max;
    if (!p.choices.empty()) j["choices"] = p.choices;
    if (!p.component_kind.empty()) j["component_kind"] = p.component_kind;
    a.push_back(std::move(j));
  }
  return a;
}

static json contract_json(const std::vector<ContractSpec>& contract) {
  json a = json::array();
  for (const ContractSpec& c : contract) {
    const char* kind = c.kind == ContractSpec::Kind::produces ? "produces"
                       : c.kind == ContractSpec::Kind::one_of ? "consumes_one_of"
                                                              : "consumes";
    json j = {{"kind", kind}};
    if (!c.input.empty()) j["input"] = c.input;
    j["schema"] = c.schema_text;
    a.push_back(std::move(j));
  }
  return a;
}

static json ports_json(const std::vector<PortSpec>& ports) {
  json a = json::array();
  for (const PortSpec& p : ports)
    a.push_back({{"name", p.name}, {"schema", p.schema.str()}, {"side", p.side}, {"optional", p.optional}, {"doc", p.doc}});
  return a;
}

void write_schema_json(std::ostream& out, const Registry& registry, const std::string& only) {
  json nodes = json::object(), components = json::object();
  for (const NodeType* t : registry.node_types()) {
    if (!only.empty() && t->name != only && t->plugin != only) continue;
    nodes[t->name] = {{"plugin", t->plugin},
                      {"doc", t->doc},
                      {"source", t->source},
                      {"concurrency", t->concurrency == Concurrency::parallel ? "parallel" : "serial"},
                      {"deterministic", t->deterministic},
                      {"random_when", t->random_when},
                      {"params", params_json(t->params)},
                      {"inputs", ports_json(t->inputs)},
                      {"outputs", ports_json(t->outputs)}};
  }
  for (const ComponentType* t : registry.component_types()) {
    if (!only.empty() && t->name != only && t->plugin != only) continue;
    components[t->name] = {{"plugin", t->plugin},
                           {"kind", t->kind},
                           {"doc", t->doc},
                           {"params", params_json(t->params)},
                           {"contract", contract_json(t->contract)}};
  }
  const json doc = {{"nodes", std::move(nodes)}, {"components", std::move(components)}};
  // Docs and names come from plugins: invalid UTF-8 becomes U+FFFD rather than a throw.
  out << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

static std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '<' || c == '>' || c == '|') out += '\\';
    out += c;
  }
  return out;
}

// One node's record-shaped label: input ports, id and type, the parameters the file sets (or
// all), output ports. Inside a subgraph's cluster the id is shown without the instance's prefix.
static void write_dot_node(std::ostream& out, const ResolvedNode& n, std::size_t i, const DotOptions& options) {
  std::string ins, outs;
  for (std::size_t p = 0; p < n.type->inputs.size(); ++p)
    ins += cat(p ? "|" : "", "<i", p, "> ", dot_escape(n.type->inputs[p].name), n.type->inputs[p].side ? " (side)" : "");
  for (std::size_t p = 0; p < n.type->outputs.size(); ++p)
    outs += cat(p ? "|" : "", "<o", p, "> ", dot_escape(n.type->outputs[p].name));
  std::string params;
  for (const auto& [k, v] : n.params.all()) {
    // Defaults are noise in a drawing: only what the file sets, unless asked for all.
    if (!options.all_params && !(n.spec->params.is_map() && n.spec->params.get(k))) continue;
    std::string text = v.str();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    params += dot_escape(k + "=" + text) + "\\l";
  }
  std::string id = n.id();
  if (!n.spec->within.empty()) id = id.substr(n.spec->within.back().instance.size() + 2);
  out << "  n" << i << " [label=\"{";
  if (!ins.empty()) out << "{" << ins << "}|";
  out << dot_escape(id) << "\\n" << dot_escape(n.type->name);
  if (!params.empty()) out << "|" << params;
  if (!outs.empty()) out << "|{" << outs << "}";
  out << "}\"";
  if (n.spec->cache.is_map() || (n.spec->cache.is_boolean() && n.spec->cache.as_boolean())) out << ", style=bold";
  out << "];\n";
}

// The nodes `depth` subgraph instances deep whose instances begin with `path`: those directly
// inside, then each instance one level deeper as a cluster of its own (a GStreamer bin's box).
static void write_dot_scope(std::ostream& out, const ResolvedGraph& g, const std::vector<const SubgraphUse*>& path,
                            const DotOptions& options) {
  auto inside = [&](const ResolvedNode& n) {
    if (!n.type || n.spec->within.size() < path.size()) return false;
    for (std::size_t d = 0; d < path.size(); ++d)
      if (n.spec->within[d].instance != path[d]->instance) return false;
    return true;
  };
  std::vector<const SubgraphUse*> nested;  // instances one level deeper, in order of first node
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ResolvedNode& n = g.nodes[i];
    if (!inside(n)) continue;
    if (n.spec->within.size() == path.size()) {
      write_dot_node(out, n, i, options);
      continue;
    }
    const SubgraphUse& use = n.spec->within[path.size()];
    if (std::none_of(nested.begin(), nested.end(), [&](const SubgraphUse* u) { return u->instance == use.instance; }))
      nested.push_back(&use);
  }
  for (const SubgraphUse* use : nested) {
    std::string name = use->instance;
    if (!path.empty()) name = name.substr(path.back()->instance.size() + 2);
    out << "  subgraph \"cluster_" << dot_escape(use->instance) << "\" {\n  label=\"" << dot_escape(name) << " ("
        << dot_escape(use->subgraph) << ")\"; style=rounded; color=gray50;\n";
    std::vector<const SubgraphUse*> deeper = path;
    deeper.push_back(use);
    write_dot_scope(out, g, deeper, options);
    out << "  }\n";
  }
}

void write_dot(std::ostream& out, const ResolvedGraph& g, const DotOptions& options) {
  const bool compact = g.nodes.size() > kDotCompactNodes;
  out << "digraph embedflow {\n  rankdir=" << (compact ? "TB;\n  nodesep=0.25; ranksep=0.5; splines=true;" : "LR;")
      << "\n  node [shape=record, fontname=\"Helvetica\", fontsize=10];\n"
         "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  if (!g.spec.description.empty()) {
    std::string first = g.spec.description.substr(0, g.spec.description.find('\n'));
    out << "  labelloc=t; label=\"" << dot_escape(first) << "\";\n";
  }
  write_dot_scope(out, g, {}, options);
  for (const ResolvedEdge& e : g.edges) {
    const PortSchema& s = g.nodes[e.from.node].output_schemas[e.from.port];
    std::string label = s.str();
    // Long schemas wrap one field per line so the drawing stays readable.
    std::string wrapped;
    for (const auto& f : s.fields()) wrapped += dot_escape(f.str()) + "\\l";
    out << "  n" << e.from.node << ":o" << e.from.port << " -> n" << e.to.node << ":i" << e.to.port << " ["
        << (compact ? "tooltip" : "label") << "=\"" << (s.is_any() ? "*" : wrapped) << "\"";
    if (g.nodes[e.to.node].type->inputs[e.to.port].side) out << ", style=dashed";
    out << "];\n";
  }
  out << "}\n";
}

}  // namespace embedflow::engine

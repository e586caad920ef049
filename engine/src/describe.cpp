#include "embedflow_engine/describe.hpp"

#include <iomanip>
#include <map>
#include <sstream>

#include "embedflow/report_files.hpp"

namespace embedflow::engine {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

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
      << (t.concurrency == Concurrency::parallel ? "parallel-safe" : "serial") << "\n\n";
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

// A parameter value as typed JSON: a default of 0.5 is the number 0.5, true the boolean.
static std::string value_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return v.as_boolean() ? "true" : "false";
    case Value::Kind::integer: return std::to_string(v.as_integer());
    case Value::Kind::number: {
      JsonWriter j;
      j.value(v.as_number());
      return j.str();
    }
    case Value::Kind::string: return json_quote(v.as_string());
    case Value::Kind::list: {
      std::string s = "[";
      for (std::size_t i = 0; i < v.as_list().size(); ++i) s += (i ? ", " : "") + value_json(v.as_list()[i]);
      return s + "]";
    }
    case Value::Kind::map: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, item] : v.as_map()) {
        s += (first ? "" : ", ") + json_quote(k) + ": " + value_json(item);
        first = false;
      }
      return s + "}";
    }
  }
  return "null";
}

static void params_json(std::ostream& out, const std::vector<ParamSpec>& params) {
  out << "[";
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& p = params[i];
    out << (i ? "," : "") << "\n        {\"name\": " << json_quote(p.name) << ", \"type\": " << json_quote(param_type_name(p.type))
        << ", \"doc\": " << json_quote(p.doc);
    if (p.default_value) out << ", \"default\": " << value_json(*p.default_value);
    out << ", \"required\": " << (p.required() ? "true" : "false");
    if (p.min) out << ", \"min\": " << *p.min;
    if (p.max) out << ", \"max\": " << *p.max;
    if (!p.choices.empty()) {
      out << ", \"choices\": [";
      for (std::size_t c = 0; c < p.choices.size(); ++c) out << (c ? ", " : "") << json_quote(p.choices[c]);
      out << "]";
    }
    if (!p.component_kind.empty()) out << ", \"component_kind\": " << json_quote(p.component_kind);
    out << "}";
  }
  out << (params.empty() ? "]" : "\n      ]");
}

static void contract_json(std::ostream& out, const std::vector<ContractSpec>& contract) {
  out << "[";
  for (std::size_t i = 0; i < contract.size(); ++i) {
    const ContractSpec& c = contract[i];
    const char* kind = c.kind == ContractSpec::Kind::produces ? "produces"
                       : c.kind == ContractSpec::Kind::one_of ? "consumes_one_of"
                                                              : "consumes";
    out << (i ? ", " : "") << "{\"kind\": " << json_quote(kind);
    if (!c.input.empty()) out << ", \"input\": " << json_quote(c.input);
    out << ", \"schema\": " << json_quote(c.schema_text) << "}";
  }
  out << "]";
}

static void ports_json(std::ostream& out, const std::vector<PortSpec>& ports) {
  out << "[";
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const PortSpec& p = ports[i];
    out << (i ? ", " : "") << "{\"name\": " << json_quote(p.name) << ", \"schema\": " << json_quote(p.schema.str())
        << ", \"side\": " << (p.side ? "true" : "false") << ", \"optional\": " << (p.optional ? "true" : "false")
        << ", \"doc\": " << json_quote(p.doc) << "}";
  }
  out << "]";
}

void write_schema_json(std::ostream& out, const Registry& registry, const std::string& only) {
  out << "{\n  \"nodes\": {";
  bool first = true;
  for (const NodeType* t : registry.node_types()) {
    if (!only.empty() && t->name != only && t->plugin != only) continue;
    out << (first ? "" : ",") << "\n    " << json_quote(t->name) << ": {\n      \"plugin\": " << json_quote(t->plugin)
        << ",\n      \"doc\": " << json_quote(t->doc) << ",\n      \"source\": " << (t->source ? "true" : "false")
        << ",\n      \"concurrency\": " << json_quote(t->concurrency == Concurrency::parallel ? "parallel" : "serial")
        << ",\n      \"params\": ";
    params_json(out, t->params);
    out << ",\n      \"inputs\": ";
    ports_json(out, t->inputs);
    out << ",\n      \"outputs\": ";
    ports_json(out, t->outputs);
    out << "\n    }";
    first = false;
  }
  out << "\n  },\n  \"components\": {";
  first = true;
  for (const ComponentType* t : registry.component_types()) {
    if (!only.empty() && t->name != only && t->plugin != only) continue;
    out << (first ? "" : ",") << "\n    " << json_quote(t->name) << ": {\n      \"plugin\": " << json_quote(t->plugin)
        << ",\n      \"kind\": " << json_quote(t->kind) << ",\n      \"doc\": " << json_quote(t->doc)
        << ",\n      \"params\": ";
    params_json(out, t->params);
    out << ",\n      \"contract\": ";
    contract_json(out, t->contract);
    out << "\n    }";
    first = false;
  }
  out << "\n  }\n}\n";
}

static std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '<' || c == '>' || c == '|') out += '\\';
    out += c;
  }
  return out;
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
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ResolvedNode& n = g.nodes[i];
    if (!n.type) continue;
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
    out << "  n" << i << " [label=\"{";
    if (!ins.empty()) out << "{" << ins << "}|";
    out << dot_escape(n.id()) << "\\n" << dot_escape(n.type->name);
    if (!params.empty()) out << "|" << params;
    if (!outs.empty()) out << "|{" << outs << "}";
    out << "}\"";
    if (n.spec->cache.is_map() || (n.spec->cache.is_boolean() && n.spec->cache.as_boolean())) out << ", style=bold";
    out << "];\n";
  }
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

// GraphSpec -> YAML graph file, for the resolved graph a run records beside its outputs.
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <sstream>

#include "embedflow_engine/graph_file.hpp"

namespace embedflow::engine {
namespace {

// Strings that YAML would read back as something else ("3", "true", "null", "") are quoted.
void emit_string(YAML::Emitter& e, const std::string& s) {
  Value plain = Value::from_scalar_text(s, false);
  if (!plain.is_string() || s.empty() || s.find_first_of(":#{}[],&*!|>'\"%@`") != std::string::npos ||
      s.front() == ' ' || s.back() == ' ' || s.front() == '-' || s.front() == '?')
    e << YAML::DoubleQuoted << s;
  else
    e << s;
}

void emit_value(YAML::Emitter& e, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::null: e << YAML::Null; break;
    case Value::Kind::boolean: e << (v.as_boolean() ? "true" : "false"); break;
    case Value::Kind::integer: e << std::to_string(v.as_integer()); break;
    case Value::Kind::number: {
      double d = v.as_number();
      std::string text;
      if (std::isnan(d)) text = ".nan";
      else if (std::isinf(d)) text = d > 0 ? ".inf" : "-.inf";
      else {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, d);
        text.assign(buf, r.ptr);
        // "2" would read back as an integer.
        if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      }
      e << text;
      break;
    }
    case Value::Kind::string: emit_string(e, v.as_string()); break;
    case Value::Kind::list:
      e << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : v.as_list()) emit_value(e, item);
      e << YAML::EndSeq;
      break;
    case Value::Kind::map:
      e << YAML::BeginMap;
      for (const auto& [k, item] : v.as_map()) {
        e << YAML::Key << k << YAML::Value;
        emit_value(e, item);
      }
      e << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string graph_to_yaml(const GraphSpec& spec, const std::string& header_comment) {
  YAML::Emitter e;
  e.SetIndent(2);
  e << YAML::BeginMap;
  e << YAML::Key << "seed" << YAML::Value << std::to_string(spec.seed);
  e << YAML::Key << "max_in_flight" << YAML::Value << std::to_string(spec.max_in_flight);
  if (spec.out.is_string()) {
    e << YAML::Key << "out" << YAML::Value;
    emit_string(e, spec.out.as_string());
  }
  if (!spec.plugin_dirs.empty()) {
    e << YAML::Key << "plugin_dirs" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& d : spec.plugin_dirs) emit_string(e, d);
    e << YAML::EndSeq;
  }
  e << YAML::Key << "nodes" << YAML::Value << YAML::BeginMap;
  for (const auto& n : spec.nodes) {
    e << YAML::Key << n.id << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "type" << YAML::Value << n.type;
    if (n.params.is_map() && !n.params.as_map().empty()) {
      e << YAML::Key << "params" << YAML::Value;
      emit_value(e, n.params);
    }
    if (!n.cache.is_null()) {
      e << YAML::Key << "cache" << YAML::Value;
      emit_value(e, n.cache);
    }
    if (!n.enabled.is_null()) {
      e << YAML::Key << "enabled" << YAML::Value;
      emit_value(e, n.enabled);
    }
    if (n.in_flight > 0) e << YAML::Key << "in_flight" << YAML::Value << std::to_string(n.in_flight);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "edges" << YAML::Value << YAML::BeginSeq;
  for (const auto& edge : spec.edges) {
    std::string from = edge.from_port.empty() ? edge.from_node : edge.from_node + "." + edge.from_port;
    std::string to = edge.to_port.empty() ? edge.to_node : edge.to_node + "." + edge.to_port;
    e << from + " -> " + to;
  }
  e << YAML::EndSeq << YAML::EndMap;
  std::ostringstream out;
  std::istringstream comment(header_comment);
  for (std::string line; std::getline(comment, line);) out << "# " << line << "\n";
  out << e.c_str() << "\n";
  return out.str();
}

}  // namespace embedflow::engine

#include "embedflow/registry.hpp"

#include <set>

namespace embedflow {

void Registry::set_current_plugin(std::string name, std::string file, std::string version) {
  plugin_ = std::move(name);
  plugin_file_ = std::move(file);
  plugin_version_ = std::move(version);
}

static std::string origin(const std::string& plugin, const std::string& file) {
  return plugin.empty() ? "the host" : cat("plugin '", plugin, "' (", file, ")");
}

// Declarations are checked once at registration so a plugin bug surfaces at load, naming the
// plugin, rather than as a confusing graph error later.
static void check_params(const std::string& owner, const std::vector<ParamSpec>& params) {
  std::set<std::string> seen;
  for (const auto& p : params) {
    if (!seen.insert(p.name).second) throw ConfigError(cat(owner, ": parameter '", p.name, "' declared twice"));
    if (p.default_value && (p.type == ParamType::integer || p.type == ParamType::number)) {
      double v = p.default_value->as_number();
      if ((p.min && v < *p.min) || (p.max && v > *p.max))
        throw ConfigError(cat(owner, ": default of parameter '", p.name, "' is outside its range"));
    }
  }
}

// Files `type` (a NodeType or ComponentType) under its name in `table`, stamped with the plugin
// registering it; a name already taken is an error naming whoever took it.
template <class Type>
static void add_named(std::map<std::string, Type>& table, Type type, const std::string& owner, const std::string& plugin,
                      const std::string& plugin_file, const std::string& plugin_version) {
  auto it = table.find(type.name);
  if (it != table.end())
    throw ConfigError(cat(owner, ": the name is already registered by ", origin(it->second.plugin, it->second.plugin_file)));
  type.plugin = plugin;
  type.plugin_file = plugin_file;
  type.plugin_version = plugin_version;
  std::string name = type.name;
  table.emplace(std::move(name), std::move(type));
}

void Registry::add(NodeType type) {
  std::string owner = cat("node type '", type.name, "' from ", origin(plugin_, plugin_file_));
  if (type.name.find('.') == std::string::npos)
    throw ConfigError(cat(owner, ": names are family.name (e.g. core.limit)"));
  if (!type.create) throw ConfigError(cat(owner, ": no factory (finish the declaration with create<T>())"));
  std::set<std::string> ports;
  for (const auto& p : type.inputs)
    if (!ports.insert("in:" + p.name).second) throw ConfigError(cat(owner, ": input port '", p.name, "' declared twice"));
  for (const auto& p : type.outputs)
    if (!ports.insert("out:" + p.name).second) throw ConfigError(cat(owner, ": output port '", p.name, "' declared twice"));
  if (type.source && !type.inputs.empty()) {
    for (const auto& p : type.inputs)
      if (!p.side) throw ConfigError(cat(owner, ": a source may only have side inputs"));
  }
  check_params(owner, type.params);
  add_named(nodes_, std::move(type), owner, plugin_, plugin_file_, plugin_version_);
}

void Registry::add(ComponentType type) {
  std::string owner = cat("component type '", type.name, "' from ", origin(plugin_, plugin_file_));
  if (!type.create) throw ConfigError(cat(owner, ": no factory"));
  if (type.kind.empty()) throw ConfigError(cat(owner, ": no kind"));
  check_params(owner, type.params);
  add_named(components_, std::move(type), owner, plugin_, plugin_file_, plugin_version_);
}

const NodeType* Registry::node_type(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

const ComponentType* Registry::component_type(const std::string& name) const {
  auto it = components_.find(name);
  return it == components_.end() ? nullptr : &it->second;
}

std::vector<const NodeType*> Registry::node_types() const {
  std::vector<const NodeType*> out;
  for (const auto& [n, t] : nodes_) out.push_back(&t);
  return out;
}

std::vector<const ComponentType*> Registry::component_types() const {
  std::vector<const ComponentType*> out;
  for (const auto& [n, t] : components_) out.push_back(&t);
  return out;
}

std::vector<std::string> Registry::node_type_names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : nodes_) out.push_back(n);
  return out;
}

std::vector<std::string> Registry::component_type_names(const std::string& kind) const {
  std::vector<std::string> out;
  for (const auto& [n, t] : components_)
    if (kind.empty() || t.kind == kind) out.push_back(n);
  return out;
}

std::unique_ptr<Component> Registry::instantiate(const Value& spec, std::uint64_t seed, const std::string& owner) const {
  if (spec.is_null()) return nullptr;
  const Value* type = spec.get("type");
  if (!type || !type->is_string()) throw ConfigError(cat(owner, ": component spec has no type"));
  const ComponentType* ct = component_type(type->as_string());
  if (!ct) throw ConfigError(cat(owner, ": unknown component type '", type->as_string(), "'"));
  // Specs reaching here were validated at graph load; validating again applies defaults when a
  // node builds a spec itself.
  Value rest = Value::map({});
  for (const auto& [k, v] : spec.as_map())
    if (k != "type") rest.set(k, v);
  Params params;
  std::vector<Diagnostic> problems;
  validate_params(ct->params, rest, this, params, problems, owner);
  if (!problems.empty()) throw ConfigError(problems.front().str());
  ComponentContext ctx(params, derive_seed(seed, ct->name), *this, cat(owner, " (", ct->name, ")"));
  return ct->create(ctx);
}

std::unique_ptr<Component> ComponentContext::make_component(const std::string& param) const {
  if (!params_.has(param)) return nullptr;
  return registry_.instantiate(params_.value(param), derive_seed(seed_, param), cat(owner_, " param '", param, "'"));
}

}  // namespace embedflow

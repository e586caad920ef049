// Registry: the node and component types the loaded plugins provide. The engine passes one
// registry to each plugin's registration function; nothing registers itself statically.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/component.hpp"
#include "embedflow/node.hpp"

namespace embedflow {

class Registry {
 public:
  // Throws ConfigError when the name is taken (naming both plugins) or the declaration is
  // inconsistent (duplicate port names, a default outside its range, no factory).
  void add(NodeType type);
  void add(ComponentType type);

  const NodeType* node_type(const std::string& name) const;
  const ComponentType* component_type(const std::string& name) const;
  std::vector<const NodeType*> node_types() const;        // sorted by name
  std::vector<const ComponentType*> component_types() const;
  std::vector<std::string> node_type_names() const;
  std::vector<std::string> component_type_names(const std::string& kind = "") const;

  // Instantiates a component spec ({type: ..., params...}), validating it and applying defaults
  // (a spec read back from a snapshot was validated by another run). The one place components
  // are built: node params, nested params and specs nodes hold all come through here.
  std::unique_ptr<Component> instantiate(const Value& spec, std::uint64_t seed, const std::string& owner) const;

  // Set by the plugin loader around each registration call, stamped onto registered types.
  void set_current_plugin(std::string name, std::string file, std::string version);

 private:
  std::map<std::string, NodeType> nodes_;
  std::map<std::string, ComponentType> components_;
  std::string plugin_, plugin_file_, plugin_version_;
};

// Builds a component from a spec and narrows it to the interface T (ConfigError naming `owner`
// when the type does not implement it): e.g. a model rebuilt from a snapshot's spec text.
template <class T>
std::unique_ptr<T> build_component(const Registry& registry, const Value& spec, std::uint64_t seed, const std::string& owner) {
  return component_cast<T>(registry.instantiate(spec, seed, owner), owner);
}

}  // namespace embedflow

// Components: behaviour chosen in YAML but not streamed (models, losses, optimizers, distances,
// miners). A node parameter of type `component` takes a nested spec
//   loss: {type: torch.contrastive, margin: 1.0}
// which the registry validates with the same parameter machinery as nodes, and which the node
// instantiates in open() with ctx.component<LossInterface>("loss").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/params.hpp"
#include "embedflow/rng.hpp"

namespace embedflow {

// Base of every component; concrete interfaces (a loss, a distance) derive from it.
class Component {
 public:
  virtual ~Component() = default;
};

class Registry;

// What a component factory sees: its validated parameters, a seed, and the registry for nested
// components (a model that takes a backbone component, say).
class ComponentContext {
 public:
  ComponentContext(const Params& params, std::uint64_t seed, const Registry& registry, std::string owner)
      : params_(params), seed_(seed), registry_(registry), owner_(std::move(owner)) {}
  const Params& params() const { return params_; }
  std::uint64_t seed() const { return seed_; }
  const std::string& owner() const { return owner_; }  // "node 'train' param 'loss'"
  std::unique_ptr<Component> make_component(const std::string& param) const;
  template <class T>
  std::unique_ptr<T> component(const std::string& param) const;

 private:
  const Params& params_;
  std::uint64_t seed_;
  const Registry& registry_;
  std::string owner_;
};

struct ComponentType {
  std::string name;  // "family.name"
  std::string kind;  // "loss", "model", ...: must equal the kind a component param asks for
  std::string doc;
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Component>(const ComponentContext&)> create;
  std::string plugin, plugin_file, plugin_version;  // filled in by the registry
};

class ComponentTypeBuilder {
 public:
  ComponentTypeBuilder(std::string name, std::string kind) {
    type_.name = std::move(name);
    type_.kind = std::move(kind);
  }
  ComponentTypeBuilder& doc(std::string d) { type_.doc = std::move(d); return *this; }
  ComponentTypeBuilder& param(ParamSpec p) { type_.params.push_back(std::move(p)); return *this; }
  // T is constructed from (const ComponentContext&).
  template <class T>
  ComponentType create() {
    type_.create = [](const ComponentContext& ctx) -> std::unique_ptr<Component> { return std::make_unique<T>(ctx); };
    return type_;
  }
  ComponentType create(std::function<std::unique_ptr<Component>(const ComponentContext&)> f) {
    type_.create = std::move(f);
    return type_;
  }

 private:
  ComponentType type_;
};

template <class T>
std::unique_ptr<T> ComponentContext::component(const std::string& param) const {
  auto c = make_component(param);
  if (!c) return nullptr;
  auto* typed = dynamic_cast<T*>(c.get());
  if (!typed) throw ConfigError(cat(owner_, ": component '", param, "' does not implement the interface this node needs"));
  c.release();
  return std::unique_ptr<T>(typed);
}

}  // namespace embedflow

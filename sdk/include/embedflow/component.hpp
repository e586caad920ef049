// Components: behaviour chosen in YAML but not streamed (models, losses, optimizers, distances,
// miners). A node parameter of type `component` takes a nested spec
//   loss: {type: torch.contrastive, margin: 1.0}
// which the registry validates with the same parameter machinery as nodes, and which the node
// instantiates in open() with ctx.component<LossInterface>("loss").
//
// A component type also declares its contract, the way a node type declares its ports: what it
// reads from the inputs its node feeds it, and what it produces.
//   .consumes("batch", "a_image: any[N,...], b_image: any[N,...], pair_label: any[N]")
//   .consumes_one_of("batch", "label: any[N] | pair_labels: f32[N,N]")
//   .produces("embedding: f32[N,$embedding_dim]")       ($name: the component's integer param)
//   .check([](ContractContext& c) { ... })               (composites derive theirs from their parts)
// The names of the inputs are a convention between a component kind and the nodes that drive it
// (models are fed "in"; losses "batch" and "outputs", the model's outputs). A node's check hook
// asks for a component's contract with SchemaContext::component(), which reports unmet
// consumption as a validation error at the parameter, before any data flows.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "embedflow/params.hpp"
#include "embedflow/rng.hpp"
#include "embedflow/schema.hpp"

namespace embedflow {

// Base of every component; concrete interfaces (a loss, a distance) derive from it.
class Component {
 public:
  virtual ~Component() = default;
};

class Registry;

// Schemas of the named inputs a node feeds a component ("in", "batch", "outputs", ...).
using ContractInputs = std::map<std::string, PortSchema>;

// A component's contract, resolved for one spec: declared schemas with $params substituted,
// refined by the type's check hook.
struct ComponentContract {
  std::string type;                                        // "torch.small_cnn"
  std::map<std::string, PortSchema> consumes;              // per input: fields read, all required
  std::map<std::string, std::vector<PortSchema>> one_of;   // per input: groups, each needs one field
  PortSchema produces;                                     // what it gives (any when it cannot say)
};

// What a component type's check hook sees at graph load.
class ContractContext {
 public:
  virtual ~ContractContext() = default;
  virtual const Params& params() const = 0;
  // What the driving node feeds input `name`; any when it does not say.
  virtual const PortSchema& input(const std::string& name) const = 0;
  virtual const ContractInputs& inputs() const = 0;
  // The resolved contract of the nested component in parameter `param`, fed `inputs` (by
  // default this component's own inputs); nullptr when the parameter is unset. Its unmet
  // consumption is reported as this component's problem.
  virtual const ComponentContract* part(const std::string& param) = 0;
  virtual const ComponentContract* part(const std::string& param, const ContractInputs& inputs) = 0;
  // This component's contract as declared; the hook may refine it (set produces, add consumes).
  virtual ComponentContract& contract() = 0;
  virtual void error(const std::string& message) = 0;
};

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
  const Registry& registry() const { return registry_; }

 private:
  const Params& params_;
  std::uint64_t seed_;
  const Registry& registry_;
  std::string owner_;
};

// One declared consumption or production, as written (for inspect) and parsed.
struct ContractSpec {
  std::string input;        // consumes: the input's name; produces: empty
  std::string schema_text;  // as declared
  std::vector<PortSchema> schemas;  // consumes/produces: one; one_of: the alternatives
  enum class Kind { consumes, one_of, produces } kind = Kind::consumes;
};

struct ComponentType {
  std::string name;  // "family.name"
  std::string kind;  // "loss", "model", ...: must equal the kind a component param asks for
  std::string doc;
  std::vector<ParamSpec> params;
  std::vector<ContractSpec> contract;  // in declaration order
  std::function<void(ContractContext&)> check;
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
  ComponentTypeBuilder& params(std::vector<ParamSpec> ps) {
    for (auto& p : ps) type_.params.push_back(std::move(p));
    return *this;
  }
  // Fields read from input `input` (all required). Throws ConfigError on a schema syntax error.
  ComponentTypeBuilder& consumes(const std::string& input, const std::string& schema);
  // Alternatives separated by '|': at least one of them must be on input `input`.
  ComponentTypeBuilder& consumes_one_of(const std::string& input, const std::string& alternatives);
  ComponentTypeBuilder& produces(const std::string& schema);
  // Runs at graph load, after the declared contract is resolved; hooks accumulate in order.
  ComponentTypeBuilder& check(std::function<void(ContractContext&)> hook);
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

// Resolves the contract of a validated component spec ({type: ..., params...}) fed `inputs`:
// the declared schemas with $params substituted, the check hook run (nested parts resolved
// through the registry), and every consumed field checked against the input it is read from.
// Each problem is appended as one message naming the component type.
ComponentContract resolve_contract(const Registry& registry, const Value& spec, const ContractInputs& inputs,
                                   std::vector<std::string>& problems);

// Narrows a built component to the interface its user needs; ConfigError naming `what` when it
// does not implement it. Null stays null.
template <class T>
std::unique_ptr<T> component_cast(std::unique_ptr<Component> c, const std::string& what) {
  if (!c) return nullptr;
  auto* typed = dynamic_cast<T*>(c.get());
  if (!typed) throw ConfigError(cat(what, " does not implement the interface its user needs"));
  c.release();
  return std::unique_ptr<T>(typed);
}

template <class T>
std::unique_ptr<T> ComponentContext::component(const std::string& param) const {
  return component_cast<T>(make_component(param), cat(owner_, ": component '", param, "'"));
}

}  // namespace embedflow

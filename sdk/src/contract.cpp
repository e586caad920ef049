// Component contracts: the declaration builder and their resolution at graph load.
#include <algorithm>

#include "embedflow/component.hpp"
#include "embedflow/registry.hpp"

namespace embedflow {

namespace {

ContractSpec parsed(ContractSpec::Kind kind, const std::string& input, const std::string& text) {
  ContractSpec c;
  c.kind = kind;
  c.input = input;
  c.schema_text = text;
  if (kind != ContractSpec::Kind::one_of) {
    c.schemas.push_back(PortSchema::parse(text));
    return c;
  }
  std::size_t start = 0;
  for (;;) {
    std::size_t bar = text.find('|', start);
    PortSchema alt = PortSchema::parse(text.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (alt.is_any() || alt.fields().size() != 1)
      throw ConfigError(cat("consumes_one_of(\"", text, "\"): each alternative is one field, separated by '|'"));
    c.schemas.push_back(std::move(alt));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  if (c.schemas.size() < 2) throw ConfigError(cat("consumes_one_of(\"", text, "\"): give two or more alternatives"));
  return c;
}

std::string field_names(const PortSchema& s) {
  std::string out;
  for (const auto& f : s.fields()) out += (out.empty() ? "" : ", ") + f.name;
  return out;
}

constexpr int kMaxContractDepth = 32;  // nested parts; a spec cannot recurse, this guards hooks

class Resolver final : public ContractContext {
 public:
  Resolver(const Registry& registry, const Params& params, const ContractInputs& inputs, ComponentContract& contract,
           std::vector<std::string>& problems, std::string label, int depth)
      : registry_(registry), params_(params), inputs_(inputs), contract_(contract), problems_(problems),
        label_(std::move(label)), depth_(depth) {}

  const Params& params() const override { return params_; }
  const PortSchema& input(const std::string& name) const override {
    static const PortSchema any;
    auto it = inputs_.find(name);
    return it == inputs_.end() ? any : it->second;
  }
  const ContractInputs& inputs() const override { return inputs_; }
  const ComponentContract* part(const std::string& param) override { return part(param, inputs_); }
  const ComponentContract* part(const std::string& param, const ContractInputs& inputs) override {
    if (!params_.has(param) || !params_.value(param).is_map()) return nullptr;
    if (depth_ >= kMaxContractDepth) {
      error(cat("components nested deeper than ", kMaxContractDepth, " levels"));
      return nullptr;
    }
    parts_.push_back(std::make_unique<ComponentContract>());
    *parts_.back() = resolve(registry_, params_.value(param), inputs, problems_, cat(label_, " param '", param, "'"), depth_ + 1);
    return parts_.back().get();
  }
  ComponentContract& contract() override { return contract_; }
  void error(const std::string& message) override { problems_.push_back(cat(label_, ": ", message)); }

  static ComponentContract resolve(const Registry& registry, const Value& spec, const ContractInputs& inputs,
                                   std::vector<std::string>& problems, const std::string& where, int depth) {
    ComponentContract contract;
    const Value* type = spec.is_map() ? spec.get("type") : nullptr;
    if (!type || !type->is_string()) return contract;
    contract.type = type->as_string();
    const ComponentType* ct = registry.component_type(contract.type);
    if (!ct) return contract;  // reported by parameter validation
    std::string label = where.empty() ? contract.type : cat(where, " (", contract.type, ")");

    Value rest = Value::map({});
    for (const auto& [k, v] : spec.as_map())
      if (k != "type") rest.set(k, v);
    Params params;
    std::vector<Diagnostic> invalid;
    validate_params(ct->params, rest, &registry, params, invalid, "");
    if (!invalid.empty()) return contract;  // reported by parameter validation

    const auto ints = params.integer_values();
    for (const ContractSpec& c : ct->contract) {
      switch (c.kind) {
        case ContractSpec::Kind::consumes: {
          PortSchema& into = contract.consumes[c.input];
          const PortSchema declared = substitute(c.schemas.front(), ints, {});
          for (const auto& f : declared.fields()) into.add(f);
          break;
        }
        case ContractSpec::Kind::one_of: {
          PortSchema group;
          for (const auto& alt : c.schemas) {
            const PortSchema declared = substitute(alt, ints, {});
            group.add(declared.fields().front());
          }
          contract.one_of[c.input].push_back(std::move(group));
          break;
        }
        case ContractSpec::Kind::produces: contract.produces = substitute(c.schemas.front(), ints, {}); break;
      }
    }
    if (ct->check) {
      Resolver hook(registry, params, inputs, contract, problems, label, depth);
      try {
        ct->check(hook);
      } catch (const std::exception& e) {
        hook.error(e.what());
      }
    }

    // What it consumes against what it is fed. Symbols bind across all its inputs (N: the batch).
    DimBindings bindings;
    for (const auto& [input, consumed] : contract.consumes) {
      auto it = inputs.find(input);
      if (it == inputs.end() || it->second.is_any()) continue;
      std::vector<std::string> found;
      unify(it->second, consumed, bindings, found);
      for (const auto& msg : found) problems.push_back(cat(label, " reads ", input, ": ", msg));
    }
    for (const auto& [input, groups] : contract.one_of) {
      auto it = inputs.find(input);
      if (it == inputs.end() || it->second.is_any()) continue;
      for (const PortSchema& group : groups) {
        PortSchema present;
        for (const auto& f : group.fields())
          if (it->second.find(f.name)) present.add(f);
        if (present.is_any()) {
          problems.push_back(cat(label, " reads ", input, ": needs one of {", field_names(group), "} but it has {",
                                 field_names(it->second), "}"));
          continue;
        }
        std::vector<std::string> found;
        unify(it->second, present, bindings, found);
        for (const auto& msg : found) problems.push_back(cat(label, " reads ", input, ": ", msg));
      }
    }
    contract.produces = substitute(contract.produces, {}, bindings);
    return contract;
  }

 private:
  const Registry& registry_;
  const Params& params_;
  const ContractInputs& inputs_;
  ComponentContract& contract_;
  std::vector<std::string>& problems_;
  std::string label_;
  int depth_;
  std::vector<std::unique_ptr<ComponentContract>> parts_;
};

}  // namespace

ComponentTypeBuilder& ComponentTypeBuilder::consumes(const std::string& input, const std::string& schema) {
  type_.contract.push_back(parsed(ContractSpec::Kind::consumes, input, schema));
  return *this;
}

ComponentTypeBuilder& ComponentTypeBuilder::consumes_one_of(const std::string& input, const std::string& alternatives) {
  type_.contract.push_back(parsed(ContractSpec::Kind::one_of, input, alternatives));
  return *this;
}

ComponentTypeBuilder& ComponentTypeBuilder::produces(const std::string& schema) {
  type_.contract.push_back(parsed(ContractSpec::Kind::produces, "", schema));
  return *this;
}

ComponentTypeBuilder& ComponentTypeBuilder::check(std::function<void(ContractContext&)> hook) {
  if (!type_.check) {
    type_.check = std::move(hook);
  } else {
    type_.check = [first = std::move(type_.check), second = std::move(hook)](ContractContext& c) {
      first(c);
      second(c);
    };
  }
  return *this;
}

ComponentContract resolve_contract(const Registry& registry, const Value& spec, const ContractInputs& inputs,
                                   std::vector<std::string>& problems) {
  return Resolver::resolve(registry, spec, inputs, problems, "", 0);
}

}  // namespace embedflow

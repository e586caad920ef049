#include "embedflow/node_check.hpp"

namespace embedflow {
namespace {

class CheckContext final : public SchemaContext {
 public:
  CheckContext(CheckedNode& node, const Registry& registry, std::vector<Diagnostic>& problems)
      : node_(node), registry_(registry), problems_(problems) {}
  const std::string& node_id() const override { return node_.id; }
  const Params& params() const override { return *node_.params; }
  const PortSchema& input(const std::string& port) const override {
    int i = node_.type->input_index(port);
    if (i < 0) throw ConfigError(cat("check hook of ", node_.type->name, " asked for unknown input '", port, "'"));
    return node_.inputs.at(static_cast<std::size_t>(i));
  }
  bool connected(const std::string& port) const override {
    int i = node_.type->input_index(port);
    if (i >= 0) return node_.input_connected.at(static_cast<std::size_t>(i));
    int o = node_.type->output_index(port);
    return o >= 0 && node_.output_connected.at(static_cast<std::size_t>(o));
  }
  const PortSchema& output(const std::string& port) const override {
    int o = node_.type->output_index(port);
    if (o < 0) throw ConfigError(cat("check hook of ", node_.type->name, " asked for unknown output '", port, "'"));
    return node_.outputs.at(static_cast<std::size_t>(o));
  }
  void set_output(const std::string& port, PortSchema schema) override {
    int o = node_.type->output_index(port);
    if (o < 0) throw ConfigError(cat("check hook of ", node_.type->name, " set unknown output '", port, "'"));
    node_.outputs.at(static_cast<std::size_t>(o)) = std::move(schema);
  }
  void error(const std::string& message, const std::string& param) override {
    SourceLocation where = node_.where;
    if (!param.empty() && node_.written && node_.written->is_map())
      if (const Value* v = node_.written->get(param))
        if (v->where().known()) where = v->where();
    problems_.push_back(Diagnostic{where, node_.id, message});
  }
  ComponentContract component(const std::string& param, const ContractInputs& inputs) override {
    if (!node_.params->has(param)) return ComponentContract{};
    return component_spec(node_.params->value(param), inputs, cat("param '", param, "'"), param);
  }
  ComponentContract component_spec(const Value& spec, const ContractInputs& inputs, const std::string& what,
                                   const std::string& param) override {
    std::vector<std::string> found;
    ComponentContract contract = resolve_contract(registry_, spec, inputs, found);
    for (const auto& msg : found) error(cat(what, ": ", msg), param);
    return contract;
  }

 private:
  CheckedNode& node_;
  const Registry& registry_;
  std::vector<Diagnostic>& problems_;
};

}  // namespace

void run_check_hook(CheckedNode& node, const Registry& registry, std::vector<Diagnostic>& problems) {
  if (!node.type || !node.type->check) return;
  CheckContext ctx(node, registry, problems);
  try {
    node.type->check(ctx);
  } catch (const std::exception& ex) {
    problems.push_back(Diagnostic{node.where, node.id, ex.what()});
  }
}

}  // namespace embedflow

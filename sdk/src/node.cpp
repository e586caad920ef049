#include "embedflow/node.hpp"

namespace embedflow {

int NodeType::input_index(const std::string& port) const {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == port) return static_cast<int>(i);
  return -1;
}

int NodeType::output_index(const std::string& port) const {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == port) return static_cast<int>(i);
  return -1;
}

static PortSpec make_port(std::string name, std::string schema, std::string doc) {
  PortSpec p;
  p.name = std::move(name);
  p.doc = std::move(doc);
  p.schema_text = schema;
  p.schema = PortSchema::parse(schema);
  return p;
}

NodeTypeBuilder& NodeTypeBuilder::input(std::string name, std::string schema, std::string doc) {
  type_.inputs.push_back(make_port(std::move(name), std::move(schema), std::move(doc)));
  return *this;
}

NodeTypeBuilder& NodeTypeBuilder::optional_input(std::string name, std::string schema, std::string doc) {
  type_.inputs.push_back(make_port(std::move(name), std::move(schema), std::move(doc)));
  type_.inputs.back().optional = true;
  return *this;
}

NodeTypeBuilder& NodeTypeBuilder::side_input(std::string name, std::string schema, std::string doc, bool optional) {
  type_.inputs.push_back(make_port(std::move(name), std::move(schema), std::move(doc)));
  type_.inputs.back().side = true;
  type_.inputs.back().optional = optional;
  return *this;
}

NodeTypeBuilder& NodeTypeBuilder::output(std::string name, std::string schema, std::string doc) {
  type_.outputs.push_back(make_port(std::move(name), std::move(schema), std::move(doc)));
  return *this;
}

NodeTypeBuilder& NodeTypeBuilder::check(std::function<void(SchemaContext&)> hook) {
  if (!type_.check) {
    type_.check = std::move(hook);
  } else {
    auto first = std::move(type_.check);
    type_.check = [first = std::move(first), second = std::move(hook)](SchemaContext& c) {
      first(c);
      second(c);
    };
  }
  return *this;
}

NodeTypeBuilder& NodeTypeBuilder::forward(const std::string& from, const std::string& to) {
  return check([from, to](SchemaContext& c) { c.set_output(to, c.input(from)); });
}

}  // namespace embedflow

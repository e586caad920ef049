// Parameters: declared once beside a node's body (name, type, default, range or choices, doc);
// `embedflow inspect`, validation, --set overrides and the generated schema JSON all read the
// same declaration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/value.hpp"

namespace embedflow {

enum class ParamType {
  boolean,
  integer,
  number,
  string,
  path,         // a string naming a file or directory
  choice,       // a string from a fixed set
  integer_list,
  number_list,
  string_list,
  component,    // a nested spec {type: family.name, ...} instantiated through the registry
  any,          // free-form YAML (lists of maps, etc.), validated by the node's own hook
};
const char* param_type_name(ParamType t);

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::string;
  std::string doc;
  std::optional<Value> default_value;  // absent and !optional -> required
  bool optional = false;               // may be left unset (no default)
  std::optional<double> min, max;      // numeric bounds (inclusive), also for list elements
  std::vector<std::string> choices;    // choice
  std::string component_kind;          // component: e.g. "loss", "model", "optimizer"
  bool affects_output = true;          // false: left out of cache fingerprints (e.g. log interval)

  bool required() const { return !default_value && !optional; }
};

// Fluent builder: Param::integer("batch_size").default_value(32).min(1).doc("records per batch")
class Param {
 public:
  static Param boolean(std::string name) { return Param(std::move(name), ParamType::boolean); }
  static Param integer(std::string name) { return Param(std::move(name), ParamType::integer); }
  static Param number(std::string name) { return Param(std::move(name), ParamType::number); }
  static Param string(std::string name) { return Param(std::move(name), ParamType::string); }
  static Param path(std::string name) { return Param(std::move(name), ParamType::path); }
  static Param choice(std::string name, std::vector<std::string> choices) {
    Param p(std::move(name), ParamType::choice);
    p.spec_.choices = std::move(choices);
    return p;
  }
  static Param integers(std::string name) { return Param(std::move(name), ParamType::integer_list); }
  static Param numbers(std::string name) { return Param(std::move(name), ParamType::number_list); }
  static Param strings(std::string name) { return Param(std::move(name), ParamType::string_list); }
  static Param component(std::string name, std::string kind) {
    Param p(std::move(name), ParamType::component);
    p.spec_.component_kind = std::move(kind);
    return p;
  }
  static Param any(std::string name) { return Param(std::move(name), ParamType::any); }

  Param& doc(std::string d) { spec_.doc = std::move(d); return *this; }
  Param& default_value(Value v) { spec_.default_value = std::move(v); return *this; }
  Param& default_value(bool b) { return default_value(Value::boolean(b)); }
  Param& default_value(int i) { return default_value(Value::integer(i)); }
  Param& default_value(std::int64_t i) { return default_value(Value::integer(i)); }
  Param& default_value(double d) { return default_value(Value::number(d)); }
  Param& default_value(const char* s) { return default_value(Value::string(s)); }
  Param& default_value(std::string s) { return default_value(Value::string(std::move(s))); }
  Param& default_value(std::vector<std::int64_t> v);
  Param& default_value(std::vector<double> v);
  Param& default_value(std::vector<std::string> v);
  Param& optional() { spec_.optional = true; return *this; }
  Param& min(double v) { spec_.min = v; return *this; }
  Param& max(double v) { spec_.max = v; return *this; }
  Param& range(double lo, double hi) { spec_.min = lo; spec_.max = hi; return *this; }
  Param& not_fingerprinted() { spec_.affects_output = false; return *this; }

  operator ParamSpec() const { return spec_; }  // NOLINT: builders convert implicitly
  const ParamSpec& spec() const { return spec_; }

 private:
  Param(std::string name, ParamType type) { spec_.name = std::move(name); spec_.type = type; }
  ParamSpec spec_;
};

// Resolved, validated parameter values of one node or component instance.
class Params {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const Value& value(const std::string& name) const;  // throws ConfigError if unset
  bool boolean(const std::string& name) const { return value(name).as_boolean(); }
  std::int64_t integer(const std::string& name) const { return value(name).as_integer(); }
  double number(const std::string& name) const { return value(name).as_number(); }
  const std::string& string(const std::string& name) const { return value(name).as_string(); }
  std::vector<std::int64_t> integers(const std::string& name) const;
  std::vector<double> numbers(const std::string& name) const;
  std::vector<std::string> strings(const std::string& name) const;

  void set(const std::string& name, Value v) { values_[name] = std::move(v); }
  const std::map<std::string, Value>& all() const { return values_; }
  // Integer-valued params, for $param dims in schemas.
  std::map<std::string, std::int64_t> integer_values() const;

 private:
  std::map<std::string, Value> values_;
};

class Registry;

// Checks `given` (a map as written) against `specs`: unknown names (with a suggestion), missing
// required ones, wrong types, out-of-range numbers, unknown choices, and nested component specs
// (through `registry`, which may be null to skip them). Fills `out` with defaults applied and
// scalar types normalised (an integer given for a number becomes a number).
// Each problem is appended to `problems` with the location of the offending value.
void validate_params(const std::vector<ParamSpec>& specs, const Value& given, const Registry* registry,
                     Params& out, std::vector<Diagnostic>& problems, const std::string& owner);

// Edit distance suggestion: the candidate closest to `word`, or "" when none is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace embedflow

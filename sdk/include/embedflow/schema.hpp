// Port schemas: what fields a port carries, their dtypes and shapes, with symbolic dimensions.
//
// Written as text next to a node's ports, e.g.
//   "image: f32[B,1,28,28], label: i64[B]"
//   "embedding: f32[B,$embedding_dim]"   ($name = the node's integer parameter)
//   "*"                                  (anything; shape checks are skipped)
// A dim is an integer, a SYMBOL (bound per node across all its ports), $param, or ? (unknown).
// A trailing "..." in a shape allows any further dims; a shape omitted entirely allows any shape.
// Dtype "any" matches every dtype. Schemas are open: a record may carry extra fields.
//
// The engine unifies the schema each producer guarantees with the schema each consumer requires,
// at graph load, so a D mismatch between a model and a loss is reported before any data flows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/array.hpp"

namespace embedflow {

struct Dim {
  enum class Kind { fixed, symbol, param, unknown, rest };
  Kind kind = Kind::unknown;
  std::int64_t value = -1;  // fixed
  std::string name;         // symbol or param name
  std::string str() const;
  bool operator==(const Dim& o) const { return kind == o.kind && value == o.value && name == o.name; }
};

struct FieldSchema {
  std::string name;
  std::optional<DType> dtype;            // nullopt = any
  std::optional<std::vector<Dim>> shape; // nullopt = any shape
  std::string str() const;
};

class PortSchema {
 public:
  PortSchema() = default;  // "any"
  // Throws ConfigError with the offending text on a syntax error.
  static PortSchema parse(const std::string& text);
  static PortSchema any() { return PortSchema(); }

  bool is_any() const { return any_; }
  const std::vector<FieldSchema>& fields() const { return fields_; }
  const FieldSchema* find(const std::string& name) const;
  void add(FieldSchema f);  // replaces a field of the same name
  bool remove(const std::string& name);
  std::string str() const;

  // Records on this port carry a component in serialised form (a model snapshot: weights and
  // spec); `produces` is what that component gives once rebuilt (its contract). This is how a
  // trained model's embedding size travels from torch.train through core.keep_best or a funnel
  // to torch.embed at graph load. Carried contracts are not fields: unify ignores them.
  void set_carried(const std::string& name, PortSchema produces);
  const PortSchema* carried(const std::string& name) const;  // nullptr when not declared
  const std::vector<std::pair<std::string, std::shared_ptr<const PortSchema>>>& carried_all() const { return carried_; }

 private:
  bool any_ = true;
  std::vector<FieldSchema> fields_;
  std::vector<std::pair<std::string, std::shared_ptr<const PortSchema>>> carried_;
};

// Symbol bindings of one node: symbol -> concrete size.
using DimBindings = std::map<std::string, std::int64_t>;

// Resolves $param dims to numbers (params maps names to integers) and bound symbols to numbers.
PortSchema substitute(const PortSchema& schema, const std::map<std::string, std::int64_t>& params,
                      const DimBindings& bindings);

// Checks that `produced` satisfies `required`, binding symbols of `required` in `bindings`.
// Appends one human-readable message per problem; returns true when there were none.
bool unify(const PortSchema& produced, const PortSchema& required, DimBindings& bindings,
           std::vector<std::string>& problems);

// Adds a leading dimension named `dim` to every field (what a batcher does to a schema), or
// removes the leading dimension (an unbatcher).
PortSchema batched(const PortSchema& s, const Dim& dim);
PortSchema unbatched(const PortSchema& s);

}  // namespace embedflow

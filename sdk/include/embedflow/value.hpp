// Value: a parameter value as written in a graph file (or on the command line with --set), with
// the place it was written so every validation error can point at it. Scalars keep their
// original text so an ill-typed value can be quoted back to the user.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedflow/error.hpp"

namespace embedflow {

class Value {
 public:
  enum class Kind { null, boolean, integer, number, string, list, map };
  using List = std::vector<Value>;
  using Map = std::vector<std::pair<std::string, Value>>;  // ordered as written

  Value() = default;
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(List items);
  static Value map(Map entries);
  // Guesses the kind of a bare scalar as YAML would ("3" integer, "0.5" number, "true" boolean,
  // anything else string). Used for YAML plain scalars and --set values.
  static Value from_scalar_text(const std::string& text, bool quoted);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_boolean() const { return kind_ == Kind::boolean; }
  bool is_integer() const { return kind_ == Kind::integer; }
  bool is_number() const { return kind_ == Kind::number || kind_ == Kind::integer; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_map() const { return kind_ == Kind::map; }

  bool as_boolean() const;
  std::int64_t as_integer() const;
  double as_number() const;  // integers widen
  const std::string& as_string() const;
  const List& as_list() const;
  const Map& as_map() const;
  // Map lookup; nullptr when absent or not a map.
  const Value* get(std::string_view key) const;
  Value* get_mutable(std::string_view key);
  void set(const std::string& key, Value v);  // on maps: add or replace

  const SourceLocation& where() const { return where_; }
  Value& at(SourceLocation where) { where_ = std::move(where); return *this; }

  // Canonical single-line text (flow-style YAML); used for fingerprints and messages.
  std::string str() const;
  const char* kind_name() const;
  bool operator==(const Value& o) const;  // ignores locations

 private:
  Kind kind_ = Kind::null;
  bool b_ = false;
  std::int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  List list_;
  Map map_;
  SourceLocation where_;
};

}  // namespace embedflow

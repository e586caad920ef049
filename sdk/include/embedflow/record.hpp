// Record: the message on every edge. An ordered set of named fields, each an Array. A batch is a
// Record whose arrays share a leading dimension. Records travel as shared pointers to const: a
// node never copies or mutates what it received; it builds a new Record (which may share arrays
// with the input, so forwarding a field costs a pointer copy).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embedflow/array.hpp"

namespace embedflow {

class Record {
 public:
  Record() = default;

  // Adds or replaces a field. Returns *this so records build in one expression.
  Record& set(std::string name, Array value);
  bool has(std::string_view name) const;
  // Throws DataError naming the missing field and the fields present.
  const Array& get(std::string_view name) const;
  const Array* find(std::string_view name) const;
  bool erase(std::string_view name);

  std::size_t size() const { return fields_.size(); }
  const std::vector<std::pair<std::string, Array>>& fields() const { return fields_; }

  // The shared leading dimension of all fields (batch size); throws when fields disagree.
  std::int64_t batch_size() const;
  std::string describe() const;  // "{image: u8[28,28], label: i64[]}"

 private:
  std::vector<std::pair<std::string, Array>> fields_;
};

using RecordPtr = std::shared_ptr<const Record>;

inline RecordPtr share(Record r) { return std::make_shared<const Record>(std::move(r)); }

// One line of values, as core.sink prints a record: "{index: 3, value: 1.5, tags: ["a", "b"]}".
// Arrays of more than 8 elements show as their dtype and shape ("u8[28,28,1]"), string columns as
// their first 8 strings; floats print with 6 significant digits.
std::string format_record(const Record& record);

}  // namespace embedflow

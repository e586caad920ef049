// The JSON reader for crowd annotation files: nlohmann-json parses (RFC 8259), and the tree it
// builds keeps the line and column each value starts at, so an error about a value can say
// file:line:col. Integers without fraction or exponent are kept exactly (int64); other numbers
// as double. Syntax errors are nlohmann's messages behind file:line:col.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace embedflow::crowd {

struct JsonValue {
  enum class Kind { null, boolean, integer, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::int64_t integer = 0;  // Kind::integer
  double number = 0;         // Kind::number (and Kind::integer, converted)
  std::string string;
  std::vector<JsonValue> items;                              // array
  std::vector<std::pair<std::string, JsonValue>> members;    // object, in file order
  int line = 0, column = 0;                                  // where the value starts (1-based)

  const JsonValue* find(const std::string& key) const;  // object member or null
  const char* kind_name() const;                        // "an integer", "an array", ...
};

// Parses a whole file; throws DataError "file:line:col: what" on a syntax error, ConfigError
// when the file cannot be opened.
JsonValue parse_json_file(const std::string& path);
// Parses text; `name` is the file name used in messages.
JsonValue parse_json(const std::string& text, const std::string& name);

}  // namespace embedflow::crowd

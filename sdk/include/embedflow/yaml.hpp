// YAML text -> Value: the one conversion the engine (graph files, --set values) and plugins
// (component specs carried in model snapshots and checkpoints) share.
//
// Every Value keeps where it was written. YAML 1.1 merge keys ("<<: *defaults") are resolved.
// Aliases are followed, within limits: nesting deeper than kMaxYamlDepth (a self-referencing
// alias such as `&L {x: *L}` is infinitely deep) and documents that expand to more than
// kMaxYamlValues values (an alias bomb: nine nested lists of nine aliases each) or to more than
// kMaxYamlBytes bytes of keys and scalar text (a long string repeated through aliases: 13 KB of
// YAML would otherwise become a gigabyte) are errors, not crashes or gigabytes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/value.hpp"

namespace YAML {
class Node;
}

namespace embedflow {

inline constexpr int kMaxYamlDepth = 256;
inline constexpr std::size_t kMaxYamlValues = 100'000;
inline constexpr std::size_t kMaxYamlBytes = 16u << 20;

// What one document has expanded to so far, across calls on it: values, and bytes of keys and
// scalar text.
struct YamlBudget {
  std::size_t values = 0;
  std::size_t bytes = 0;
};

// Parses one YAML document. Throws ConfigError "FILE:LINE:COL: message" on malformed YAML, on a
// second document, or past the limits above. `file` names the text in locations and messages.
Value parse_yaml(const std::string& text, const std::string& file);

// The first YAML document of `text` (an undefined node when there is none) and, in `second`, where a
// second document begins (line 0: there is none). yaml-cpp's LoadAll, given some malformed text,
// makes empty documents without end until memory runs out, so documents are counted from the
// parser's events, two at most, and only the first is built. Throws YAML::Exception as yaml-cpp
// does on malformed YAML.
YAML::Node first_yaml_document(const std::string& text, const std::string& file, SourceLocation& second);

// The conversion of an already-parsed node (the graph-file parser walks the document itself to
// locate keys). Problems found below `node` (a bad merge key, a limit) are appended to `problems`
// when given, else thrown as ConfigError. `budget` counts what was converted so far across calls
// on one document.
Value yaml_to_value(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* problems,
                    YamlBudget* budget = nullptr);

// The location of a yaml-cpp mark (0-based line/column) as a 1-based SourceLocation.
SourceLocation yaml_location(const std::string& file, int line, int column);

}  // namespace embedflow

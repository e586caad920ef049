#include "embedflow_runs/bounded_json.hpp"

#include "embedflow/error.hpp"

namespace embedflow::runs {

// Strings are skipped with their escapes; malformed text is left to the parser's own message.
nlohmann::ordered_json parse_bounded_json(const std::string& text, const std::string& what) {
  int depth = 0, line = 1;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        throw ConfigError(cat(what, ":", line, ": JSON nested deeper than ", kMaxJsonDepth,
                              " levels (the limit for a run folder's JSON, kMaxJsonDepth)"));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(cat(what, ": not JSON: ", e.what()));
  }
}

}  // namespace embedflow::runs

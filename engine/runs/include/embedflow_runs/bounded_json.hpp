// JSON text read back from a run folder (run.json, metrics.jsonl), parsed with its nesting
// measured first, without recursion: a document of 10,000 nested objects is a located error
// instead of a walk (or a copy, or a dump) that overflows the stack.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace embedflow::runs {

inline constexpr int kMaxJsonDepth = 64;

// Deeper than kMaxJsonDepth is a ConfigError "<what>:<line>: JSON nested deeper than 64 levels
// (...)"; malformed JSON is a ConfigError "<what>: not JSON: ...".
nlohmann::ordered_json parse_bounded_json(const std::string& text, const std::string& what);

}  // namespace embedflow::runs

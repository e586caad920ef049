// Error types. Nodes throw; the engine catches, adds the node id and the graph-file location,
// cancels the graph and maps the error class to an exit code (ConfigError -> 2, others -> 1).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace embedflow {

// A place in a text file (graph file, CSV, annotation file). line/column are 1-based; 0 = unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  bool known() const { return !file.empty(); }
  std::string str() const {
    if (file.empty()) return "";
    std::string s = file;
    if (line > 0) s += ":" + std::to_string(line);
    if (line > 0 && column > 0) s += ":" + std::to_string(column);
    return s;
  }
};

// Base of every embedflow error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user asked for something impossible: bad parameter, bad graph, unknown type. Exit code 2.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Input data is bad: a malformed CSV row, a corrupt image, a NaN loss. Exit code 1.
class DataError : public Error {
 public:
  using Error::Error;
};

// One validation finding; the engine collects all of them before reporting.
struct Diagnostic {
  SourceLocation where;
  std::string node;     // node id, empty for graph-level findings
  std::string message;

  std::string str() const {
    std::string s;
    if (where.known()) s += where.str() + ": ";
    if (!node.empty()) s += "node '" + node + "': ";
    return s + message;
  }
};

// Concatenates its arguments with operator<<, so error sites stay one line:
//   throw DataError(cat(path, ":", line, ": expected 8 columns, got ", n));
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

}  // namespace embedflow

// Repeated info lines, summarised. While a graph's nodes open, many of them often say the same
// thing (33 image.id_filter nodes reading two files: "q_i: 781 ids listed in split.csv with role
// query", and the same for q_v, q_px, ...). The runtime holds the lines logged while nodes open
// (LogSummaryScope) and prints each info message that several sources logged word for word once,
// where it first came, naming the sources:
//
//   [info] 9 nodes (q_i, q_v, q_px, ...): 781 ids listed in data/photos/split.csv with role query
//   [info] trainable, trainable_b, valset: 1008 ids listed in data/photos/validation.csv
//
// Lines that differ, and warnings, errors and debug lines, are printed as they came, in order.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embedflow/log.hpp"

namespace embedflow::engine {

// At most this many sources are named on a summary line; more are counted ("9 nodes (a, b, c, ...)").
inline constexpr std::size_t kSummaryNames = 3;

struct LogLine {
  LogLevel level = LogLevel::info;
  std::string source, message;
};

// Splits a whole line as log.hpp's sinks receive it ("[info] source: message\n").
inline LogLine parse_log_line(LogLevel level, std::string_view line) {
  LogLine out;
  out.level = level;
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (const auto close = line.find("] "); !line.empty() && line.front() == '[' && close != std::string_view::npos)
    line.remove_prefix(close + 2);
  // A node id has no ": " (nor spaces); a line without a source keeps its whole text as the message.
  const auto colon = line.find(": ");
  if (colon != std::string_view::npos && line.substr(0, colon).find(' ') == std::string_view::npos) {
    out.source = std::string(line.substr(0, colon));
    out.message = std::string(line.substr(colon + 2));
  } else {
    out.message = std::string(line);
  }
  return out;
}

// The lines to print: an info message logged by two or more sources becomes one line at its first
// place, with source "a, b" (up to kSummaryNames names) or "N nodes (a, b, c, ...)".
inline std::vector<LogLine> summarise_log_lines(const std::vector<LogLine>& lines) {
  std::map<std::string, std::vector<std::string>> sources;  // info message -> distinct sources, in order
  for (const auto& l : lines) {
    if (l.level != LogLevel::info || l.source.empty()) continue;
    auto& s = sources[l.message];
    bool seen = false;
    for (const auto& x : s) seen = seen || x == l.source;
    if (!seen) s.push_back(l.source);
  }
  std::vector<LogLine> out;
  std::map<std::string, bool> printed;
  for (const auto& l : lines) {
    if (l.level != LogLevel::info || l.source.empty() || sources[l.message].size() < 2) {
      out.push_back(l);
      continue;
    }
    if (printed[l.message]) continue;
    printed[l.message] = true;
    const auto& s = sources[l.message];
    std::string names;
    for (std::size_t i = 0; i < s.size() && i < kSummaryNames; ++i) names += (i ? ", " : "") + s[i];
    LogLine summary = l;
    summary.source = s.size() <= kSummaryNames ? names : cat(s.size(), " nodes (", names, ", ...)");
    out.push_back(std::move(summary));
  }
  return out;
}

// Holds every line logged from construction to destruction, then logs summarise_log_lines' lines
// through whatever sink was installed before (stderr by default).
class LogSummaryScope {
 public:
  LogSummaryScope() {
    previous_ = set_log_sink([this](LogLevel level, std::string_view line) { held_.push_back(parse_log_line(level, line)); });
  }
  ~LogSummaryScope() { flush(); }
  LogSummaryScope(const LogSummaryScope&) = delete;
  LogSummaryScope& operator=(const LogSummaryScope&) = delete;

  // Restores the previous sink and prints what was held (once).
  void flush() {
    if (done_) return;
    done_ = true;
    set_log_sink(std::move(previous_));
    for (const auto& l : summarise_log_lines(held_)) log_message(l.level, l.source, l.message);
    held_.clear();
  }

 private:
  LogSink previous_;
  std::vector<LogLine> held_;  // appended under the log's lock (sinks are called under it)
  bool done_ = false;
};

}  // namespace embedflow::engine

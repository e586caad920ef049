// Logging shared by the engine and all plugins: one process-wide level, lines to stderr,
// prefixed with the level and the node id that logged them.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "embedflow/error.hpp"

namespace embedflow {

enum class LogLevel { debug = 0, info = 1, warning = 2, error = 3, quiet = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Writes one line "[level] source: message" to stderr (thread-safe, whole lines).
void log_message(LogLevel level, std::string_view source, std::string_view message);

// Where whole lines ("[level] source: message\n") go instead of stderr: the test harness
// (embedflow/testing/capture.hpp) collects them. Called one line at a time, under the log's lock.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;
// Installs `sink` (an empty one restores stderr); returns the sink it replaces.
LogSink set_log_sink(LogSink sink);

template <class... Args>
void log_info(std::string_view source, Args&&... args) {
  if (log_level() <= LogLevel::info) log_message(LogLevel::info, source, cat(std::forward<Args>(args)...));
}
template <class... Args>
void log_warning(std::string_view source, Args&&... args) {
  if (log_level() <= LogLevel::warning) log_message(LogLevel::warning, source, cat(std::forward<Args>(args)...));
}
template <class... Args>
void log_debug(std::string_view source, Args&&... args) {
  if (log_level() <= LogLevel::debug) log_message(LogLevel::debug, source, cat(std::forward<Args>(args)...));
}

}  // namespace embedflow

#include "embedflow/log.hpp"

#include "embedflow/progress.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace embedflow {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
std::mutex g_mutex;
LogSink g_sink;  // guarded by g_mutex
std::string g_status;  // the status line on screen, guarded by g_mutex

void draw_status_locked() {
  std::fputs("\r\033[K", stderr);
  std::fputs(g_status.c_str(), stderr);
  std::fflush(stderr);
}
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

LogSink set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::swap(g_sink, sink);
  return sink;
}

void log_message(LogLevel level, std::string_view source, std::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::string line;
  line.reserve(message.size() + source.size() + 16);
  line += "[";
  line += names[static_cast<int>(level) < 4 ? static_cast<int>(level) : 3];
  line += "] ";
  if (!source.empty()) {
    line += source;
    line += ": ";
  }
  line += message;
  line += "\n";
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_sink) {
    g_sink(level, line);
    return;
  }
  // A status line may be on screen: clear it, print the log line, and draw it again below.
  if (!g_status.empty()) std::fputs("\r\033[K", stderr);
  std::fputs(line.c_str(), stderr);
  if (!g_status.empty()) draw_status_locked();
  std::fflush(stderr);
}

void set_status_line(std::string line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  bool was_shown = !g_status.empty();
  g_status = std::move(line);
  if (!g_status.empty()) draw_status_locked();
  else if (was_shown) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

}  // namespace embedflow

#include "embedflow_engine/trace.hpp"

#include <cstdio>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "embedflow/error.hpp"

namespace embedflow::engine {

TraceRecorder::Buffer& TraceRecorder::local() {
  // One buffer per (recorder, thread); the map is per thread so lookups need no lock.
  thread_local std::unordered_map<const TraceRecorder*, Buffer*> mine;
  auto it = mine.find(this);
  if (it != mine.end()) return *it->second;
  std::lock_guard<std::mutex> lock(mutex_);
  buffers_.push_back(std::make_unique<Buffer>());
  buffers_.back()->tid = static_cast<std::uint32_t>(buffers_.size());
  buffers_.back()->events.reserve(1 << 14);
  mine[this] = buffers_.back().get();
  return *buffers_.back();
}

void TraceRecorder::span(std::uint32_t node, const char* what, std::int64_t start_ns, std::int64_t end_ns) {
  if (count_.fetch_add(1, std::memory_order_relaxed) >= max_events_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  local().events.push_back(Event{node, what, start_ns, end_ns});
}

// A JSON string body: quotes and backslashes escaped, control characters as \u00XX (node ids
// and type names come from user YAML and may hold anything).
static std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void TraceRecorder::write(const std::string& path, const std::vector<std::string>& names,
                          const std::vector<std::string>& types) const {
  std::ofstream f(path);
  if (!f) throw Error(cat("cannot write trace file ", path));
  std::lock_guard<std::mutex> lock(mutex_);
  f << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  f << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"embedflow\"}}";
  for (const auto& b : buffers_) {
    f << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << b->tid << ",\"args\":{\"name\":\"worker "
      << b->tid << "\"}}";
    for (const Event& e : b->events) {
      double ts = static_cast<double>(e.start - origin_) / 1000.0;
      double dur = static_cast<double>(e.end - e.start) / 1000.0;
      f << ",\n{\"name\":\"" << json_escape(names[e.node]) << "\",\"cat\":\"" << json_escape(types[e.node])
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << b->tid << ",\"ts\":" << ts << ",\"dur\":" << dur
        << ",\"args\":{\"call\":\"" << e.what << "\"}}";
    }
  }
  f << "\n]}\n";
}

}  // namespace embedflow::engine

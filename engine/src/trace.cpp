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
  // Timestamps in microseconds with three decimals: nanosecond resolution at any run length
  // (the default six significant digits lose whole milliseconds after 1000 s).
  auto emit = [&](std::uint32_t tid, const Event& first, std::int64_t end, std::uint64_t calls, std::int64_t busy) {
    char ts[64], dur[64];
    std::snprintf(ts, sizeof ts, "%.3f", static_cast<double>(first.start - origin_) / 1000.0);
    std::snprintf(dur, sizeof dur, "%.3f", static_cast<double>(end - first.start) / 1000.0);
    f << ",\n{\"name\":\"" << json_escape(names[first.node]) << "\",\"cat\":\"" << json_escape(types[first.node])
      << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << tid << ",\"ts\":" << ts << ",\"dur\":" << dur
      << ",\"args\":{\"call\":\"" << first.what << "\"";
    if (calls > 1) {
      char b[64];
      std::snprintf(b, sizeof b, "%.3f", static_cast<double>(busy) / 1000.0);
      f << ",\"calls\":" << calls << ",\"busy_us\":" << b;
    }
    f << "}}";
  };
  for (const auto& b : buffers_) {
    f << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << b->tid << ",\"args\":{\"name\":\"worker "
      << b->tid << "\"}}";
    // Runs of tiny calls of one node (each and the gaps between them under kTinySpanNs) become
    // one span with their count and summed time: millions of 1 us spans bury a trace viewer.
    const Event* first = nullptr;  // the pending run of tiny calls
    std::int64_t end = 0, busy = 0;
    std::uint64_t calls = 0;
    for (const Event& e : b->events) {
      const bool tiny = e.end - e.start < kTinySpanNs;
      if (first && tiny && e.node == first->node && e.what == first->what && e.start - end < kTinySpanNs &&
          e.end - first->start < kMaxMergedSpanNs) {
        end = e.end;
        busy += e.end - e.start;
        ++calls;
        continue;
      }
      if (first) emit(b->tid, *first, end, calls, busy);
      first = nullptr;
      if (tiny) {
        first = &e;
        end = e.end;
        busy = e.end - e.start;
        calls = 1;
      } else {
        emit(b->tid, e, e.end, 1, e.end - e.start);
      }
    }
    if (first) emit(b->tid, *first, end, calls, busy);
  }
  f << "\n]}\n";
}

}  // namespace embedflow::engine

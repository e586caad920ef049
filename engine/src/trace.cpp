#include "embedflow_engine/trace.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
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

void TraceRecorder::write(const std::string& path, const std::vector<std::string>& names,
                          const std::vector<std::string>& types) const {
  std::ofstream f(path);
  if (!f) throw Error(cat("cannot write trace file ", path));
  std::lock_guard<std::mutex> lock(mutex_);
  // One event per line, each written by nlohmann-json: node ids and type names come from user
  // YAML and may hold any character.
  using json = nlohmann::ordered_json;
  auto line = [&](const json& event) { f << ",\n" << event.dump(-1, ' ', false, json::error_handler_t::replace); };
  f << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  f << json{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "embedflow"}}}}.dump();
  // Timestamps in microseconds: nanoseconds / 1000 as the shortest round-trip double, so
  // nanosecond resolution holds at any run length.
  auto us = [](std::int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  auto emit = [&](std::uint32_t tid, const Event& first, std::int64_t end, std::uint64_t calls, std::int64_t busy) {
    json args = {{"call", first.what}};
    if (calls > 1) {
      args["calls"] = calls;
      args["busy_us"] = us(busy);
    }
    line({{"name", names[first.node]}, {"cat", types[first.node]}, {"ph", "X"}, {"pid", 1}, {"tid", tid},
          {"ts", us(first.start - origin_)}, {"dur", us(end - first.start)}, {"args", std::move(args)}});
  };
  for (const auto& b : buffers_) {
    line({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", b->tid}, {"args", {{"name", cat("worker ", b->tid)}}}});
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

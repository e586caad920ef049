// Chrome trace events ("ph":"X" complete events), one span per node call, loadable in Perfetto
// and chrome://tracing. Threads append to their own buffers; nothing is shared on the hot path.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace embedflow::engine {

// Consecutive calls of one node on one thread, each shorter than kTinySpanNs and as close
// together, are written as one span (args: calls, busy_us), up to kMaxMergedSpanNs long.
inline constexpr std::int64_t kTinySpanNs = 20'000;
inline constexpr std::int64_t kMaxMergedSpanNs = 20'000'000;

class TraceRecorder {
 public:
  explicit TraceRecorder(std::size_t max_events = 4'000'000) : max_events_(max_events) {}

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // `what` must outlive the recorder (a string literal).
  void span(std::uint32_t node, const char* what, std::int64_t start_ns, std::int64_t end_ns);
  // Writes the JSON file; names[i] is node i's id, types[i] its type.
  void write(const std::string& path, const std::vector<std::string>& names, const std::vector<std::string>& types) const;
  std::size_t dropped() const { return dropped_.load(); }

 private:
  struct Event {
    std::uint32_t node;
    const char* what;
    std::int64_t start, end;
  };
  struct Buffer {
    std::uint32_t tid;
    std::vector<Event> events;
  };
  Buffer& local();
  std::size_t max_events_;
  std::atomic<std::size_t> count_{0};
  std::atomic<std::size_t> dropped_{0};
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::int64_t origin_ = now_ns();
};

}  // namespace embedflow::engine

// How long a node spends in its calls: the busy and CPU times of NodeStats and the busy share
// the live view shows. Header-only: a timer wraps every produce and process call. Not part of the
// engine's interface.
#pragma once

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "embedflow_engine/runtime.hpp"
#include "embedflow_engine/trace.hpp"

namespace embedflow::engine::exec {

inline std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A statistic written by one thread at a time (a serial node's calls follow each other, and
// oneTBB orders them) needs no read-modify-write; `shared` ones (a parallel node's, a source's,
// whose pump and side inputs may run at once) do. Readers (the live view) only load.
template <class T>
void bump(std::atomic<T>& counter, bool shared, T by = 1) {
  if (shared) counter.fetch_add(by, std::memory_order_relaxed);
  else counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// One node's call figures (CallTimer writes them): exactly timed calls' wall time; sampled short
// calls' count and wall time; produce/process calls made and those of them timed exactly; the
// CPU-time sample; the calls running now and the sum of their start times.
class CallStats {
 public:
  // `overlapping`: the node's process calls may run at once (a parallel node).
  explicit CallStats(bool overlapping) : overlapping_(overlapping) {}

  // Timed calls' wall time, plus the short calls' share estimated from those sampled (CallTimer).
  std::int64_t busy_estimate_ns() const {
    const std::uint64_t sampled = sampled_calls_.load(std::memory_order_relaxed);
    const std::uint64_t short_calls = calls_.load(std::memory_order_relaxed) - timed_calls_.load(std::memory_order_relaxed);
    const double per_short_call =
        sampled ? static_cast<double>(sampled_wall_ns_.load(std::memory_order_relaxed)) / static_cast<double>(sampled) : 0;
    return busy_ns_.load(std::memory_order_relaxed) +
           static_cast<std::int64_t>(std::llround(per_short_call * static_cast<double>(short_calls)));
  }
  // Busy time up to `now`, counting calls still running (a trainer's epochs replayed inside one
  // close() call would otherwise show as idle until the call returns).
  std::int64_t busy_ns(std::int64_t now) const {
    const std::int64_t running = running_calls_.load(std::memory_order_relaxed);
    const std::int64_t started = running_start_sum_.load(std::memory_order_relaxed);
    return busy_estimate_ns() + std::max<std::int64_t>(0, running * now - started);
  }
  // NodeStats' busy_s, and cpu_s scaled from it by the sampled CPU/wall ratio.
  void report(NodeStats& st) const {
    st.busy_s = static_cast<double>(busy_estimate_ns()) / 1e9;
    const double wall_sampled = static_cast<double>(wall_sampled_ns_.load());
    // An estimate: kept to the microsecond, which is all the sampling can claim.
    if (wall_sampled > 0)
      st.cpu_s = std::round(st.busy_s * static_cast<double>(cpu_sampled_ns_.load()) / wall_sampled * 1e6) / 1e6;
  }

 private:
  friend class CallTimer;
  bool overlapping_;
  std::atomic<std::int64_t> busy_ns_{0}, sampled_wall_ns_{0}, cpu_sampled_ns_{0}, wall_sampled_ns_{0}, last_call_ns_{0};
  std::atomic<std::uint64_t> calls_{0}, timed_calls_{0}, sampled_calls_{0};
  std::atomic<std::int64_t> running_calls_{0}, running_start_sum_{0};
};

// Adds the duration of one call into the node's body to its busy time (NodeStats). Two clock
// reads and a handful of atomic updates cost about as much as a small node's whole call, so
// produce and process calls that the last timed call predicts to be short (under 20 us) are
// timed one in 64, picked by Fibonacci hashing of the call's index so that no periodic pattern
// in a node's calls (a step every 4th batch) aliases with the sampling; busy time then counts
// each untimed short call as the sampled short calls' mean. Calls predicted long, and open,
// on_side and close, are timed exactly and count as running while they run (the live view's
// busy share). Thread CPU time costs a system call (about half a microsecond in a VM): taken on
// long calls and on every 8th sampled one, for the ratio that scales busy time to CPU time.
class CallTimer {
 public:
  enum Kind { every_call, sampled };
  CallTimer(CallStats& s, Kind kind) : s_(s) {
    if (kind == sampled) {
      // Only a parallel node's process calls overlap (a source's produce calls come from its
      // serial pump; on_side and close are timed as every_call).
      const std::uint64_t call = s_.overlapping_ ? s_.calls_.fetch_add(1, std::memory_order_relaxed)
                                                 : s_.calls_.load(std::memory_order_relaxed);
      if (!s_.overlapping_) s_.calls_.store(call + 1, std::memory_order_relaxed);
      if (s_.last_call_ns_.load(std::memory_order_relaxed) < kShortCallNs) {
        if ((call * 0x9E3779B97F4A7C15ull) >> 58 != 0) {  // 63 in 64 short calls go untimed
          mode_ = Mode::untimed;
          return;
        }
        mode_ = Mode::sample;
      } else {
        s_.timed_calls_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    t0_ = TraceRecorder::now_ns();
    if (mode_ == Mode::exact) {
      s_.running_start_sum_.fetch_add(t0_, std::memory_order_relaxed);
      s_.running_calls_.fetch_add(1, std::memory_order_relaxed);
      c0_ = thread_cpu_ns();
    } else if (s_.sampled_calls_.load(std::memory_order_relaxed) % 8 == 0) {
      c0_ = thread_cpu_ns();
    }
  }
  ~CallTimer() {
    if (mode_ == Mode::untimed) return;
    const std::int64_t wall = TraceRecorder::now_ns() - t0_;
    if (mode_ == Mode::exact) {
      s_.busy_ns_.fetch_add(wall, std::memory_order_relaxed);
      s_.running_calls_.fetch_sub(1, std::memory_order_relaxed);
      s_.running_start_sum_.fetch_sub(t0_, std::memory_order_relaxed);
    } else {
      s_.sampled_wall_ns_.fetch_add(wall, std::memory_order_relaxed);
      s_.sampled_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    s_.last_call_ns_.store(wall, std::memory_order_relaxed);
    if (c0_ >= 0) {
      s_.cpu_sampled_ns_.fetch_add(thread_cpu_ns() - c0_, std::memory_order_relaxed);
      s_.wall_sampled_ns_.fetch_add(wall, std::memory_order_relaxed);
    }
  }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  static constexpr std::int64_t kShortCallNs = 20000;
  enum class Mode { exact, sample, untimed };
  CallStats& s_;
  Mode mode_ = Mode::exact;
  std::int64_t t0_ = 0;
  std::int64_t c0_ = -1;
};

}  // namespace embedflow::engine::exec

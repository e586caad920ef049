// Bounded memory between a source and everything downstream of it (runtime.hpp): the in-flight
// count of each source and the count a handled message holds. Not part of the engine's interface.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

namespace embedflow::engine::exec {

// In-flight accounting of one source (see runtime.hpp): the messages descended from its records
// that are queued or being handled. Every message a node sends carries the source of the message
// it was handling and is counted here until its receiver has handled it (or holds its outputs
// for re-sequencing), so a source parks at `cap` without an allocation per record.
struct SourceState {
  std::atomic<std::int64_t> in_flight{0};
  std::int64_t cap = 64;
  std::int64_t low = 32;
  std::atomic<bool> parked{false};
  std::atomic<bool> done{false};
  std::function<void()> wake;

  void acquire() { in_flight.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    // Sequentially consistent with the pump's park (store parked, then load in_flight): of the
    // two, at least one sees the other's write, so a wake-up is never lost. The load of parked
    // comes first because the source is rarely parked and an exchange is a locked write.
    const std::int64_t n = in_flight.fetch_sub(1) - 1;
    if (n <= low && parked.load() && !done.load(std::memory_order_acquire) && parked.exchange(false)) wake();
  }
};

// A handled message's count: released on every exit path, unless something takes it over —
// the first message sent while handling it, to the same source (a chain passes one count along
// instead of adding one and releasing one), or outputs held for re-sequencing.
class HeldCount {
 public:
  explicit HeldCount(SourceState* s) : source_(s) {}
  ~HeldCount() {
    if (source_) source_->release();
  }
  SourceState* take() { return std::exchange(source_, nullptr); }
  // Counts one message sent for `s`: this count when it is still held for `s`, else a new one.
  void count_send(SourceState* s) {
    if (source_ == s) source_ = nullptr;
    else s->acquire();
  }
  HeldCount(const HeldCount&) = delete;
  HeldCount& operator=(const HeldCount&) = delete;

 private:
  SourceState* source_;
};

}  // namespace embedflow::engine::exec

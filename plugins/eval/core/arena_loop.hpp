// The compute kernels' data-parallel loop, on oneTBB like the rest of the engine. Evaluators pass
// the node's thread count (the run's --threads), so each loop runs in a task arena of exactly
// that many threads; one thread runs the body inline. Every caller writes only the rows of its
// own range, so how [0, n) is cut changes no result; the static partitioner still cuts it the
// same way for a given thread count, into contiguous ranges that keep a thread's rows together.
#pragma once

#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

namespace embedflow::evalcore {

// Calls body(begin, end) on contiguous ranges covering [0, n) from up to `threads` threads.
// An exception thrown by the body reaches the caller.
template <class Body>
void arena_for(std::int64_t n, int threads, Body&& body) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    body(std::int64_t{0}, n);
    return;
  }
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::int64_t>(0, n),
        [&](const tbb::blocked_range<std::int64_t>& r) { body(r.begin(), r.end()); }, tbb::static_partitioner());
  });
}

}  // namespace embedflow::evalcore

// A minimal fork-join loop for the compute kernels. The kernels are called from one engine task
// at a time (evaluators run at close()), so a short-lived set of std::threads per call is cheap
// next to the work and keeps the cores free of any dependency on the engine's scheduler.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace embedflow::evalcore {

// Calls body(begin, end) on contiguous chunks of [0, n) from up to `threads` threads.
template <class Body>
void parallel_for(std::int64_t n, int threads, Body&& body) {
  if (n <= 0) return;
  const std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n));
  if (workers == 1) {
    body(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  const std::int64_t chunk = (n + workers - 1) / workers;
  for (std::int64_t w = 0; w < workers; ++w) {
    const std::int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([&, w, b, e] {
      try {
        body(b, e);
      } catch (...) {
        errors[static_cast<std::size_t>(w)] = std::current_exception();
      }
    });
  }
  for (auto& t : pool) t.join();
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
}

}  // namespace embedflow::evalcore

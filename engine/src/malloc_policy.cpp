// The process's malloc policy for runs (runtime.hpp: tune_process_allocator).
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "embedflow_engine/runtime.hpp"

namespace embedflow::engine {

bool tune_process_allocator() {
  static const bool applied = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const char* system = std::getenv("EMBEDFLOW_SYSTEM_MALLOC");
    if ((tunables && std::strstr(tunables, "glibc.malloc.")) || (system && std::strcmp(system, "1") == 0))
      return false;
#if defined(__GLIBC__)
    constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more than HEAP_MAX_SIZE / 2
    constexpr int kTrimThreshold = 1 << 30;
    return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
    return false;
#endif
  }();
  return applied;
}

}  // namespace embedflow::engine

#include "embedflow/parallel.hpp"

#include <cstdlib>

#include "embedflow/error.hpp"

namespace embedflow {
namespace {

std::int64_t env_integer(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0') throw ConfigError(cat("environment variable ", name, "='", v, "' is not an integer"));
  return x;
}

}  // namespace

ParallelPlace resolve_parallel_place(std::int64_t world_size, std::int64_t rank) {
  ParallelPlace p;
  p.world_size = world_size == 0 ? env_integer("WORLD_SIZE", 1) : world_size;
  if (p.world_size < 1) throw ConfigError(cat("world_size must be at least 1, got ", p.world_size));
  p.rank = p.world_size == 1 ? 0 : rank < 0 ? env_integer("RANK", 0) : rank;
  if (p.rank < 0 || p.rank >= p.world_size)
    throw ConfigError(cat("rank ", p.rank, " is outside [0, ", p.world_size, ") (world_size ", p.world_size, ")"));
  return p;
}

RowRange rank_rows(std::int64_t rows, const ParallelPlace& place) {
  return {rows * place.rank / place.world_size, rows * (place.rank + 1) / place.world_size};
}

}  // namespace embedflow

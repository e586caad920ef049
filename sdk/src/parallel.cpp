#include "embedflow/parallel.hpp"

#include <cstdlib>

#include "embedflow/error.hpp"
#include "embedflow/node.hpp"
#include "embedflow/params.hpp"

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

void add_shard_params(NodeTypeBuilder& builder) {
  builder
      .param(Param::integer("shard_world_size").default_value(1).min(0).doc(
          "data-parallel ranks sharing this node's records (rank r takes its contiguous 1/W share); 1: no sharding; "
          "0: the WORLD_SIZE environment variable (torchrun's)"))
      .param(Param::integer("shard_rank").default_value(-1).min(-1).doc(
          "this rank in [0, shard_world_size); -1: the RANK environment variable, 0 if unset"));
}

ParallelPlace shard_place(const Params& params) {
  try {
    return resolve_parallel_place(params.integer("shard_world_size"), params.integer("shard_rank"));
  } catch (const ConfigError& e) {
    throw ConfigError(cat("shard_world_size / shard_rank: ", e.what()));
  }
}

}  // namespace embedflow

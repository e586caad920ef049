#include "embedflow/parallel.hpp"

#include <cstdlib>
#include <optional>
#include <string>

#include "embedflow/error.hpp"
#include "embedflow/node.hpp"
#include "embedflow/params.hpp"

namespace embedflow {
namespace {

// A launcher variable: its name and value, when set.
struct LaunchValue {
  const char* name = nullptr;
  std::int64_t value = 0;
};

std::optional<LaunchValue> env_integer(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0') throw ConfigError(cat("environment variable ", name, "='", v, "' is not an integer"));
  return LaunchValue{name, x};
}

// torchrun's variable first (it is what torch.distributed reads), then Slurm's equivalent, as
// srun sets it for each task.
std::optional<LaunchValue> launcher(const char* torchrun, const char* slurm) {
  if (auto v = env_integer(torchrun)) return v;
  return env_integer(slurm);
}

}  // namespace

// Precedence: an explicit parameter, then torchrun's WORLD_SIZE / RANK, then Slurm's
// SLURM_NTASKS / SLURM_PROCID. An explicit data-parallel parameter that disagrees with a variable
// the launcher set is an error rather than a silent choice: the launcher started the processes,
// and a rank that believes in another world would wait for partners that never come.
ParallelPlace resolve_parallel_place(std::int64_t world_size, std::int64_t rank) {
  ParallelPlace p;
  const auto env_world = launcher("WORLD_SIZE", "SLURM_NTASKS");
  if (world_size == 0) {
    p.world_size = env_world ? env_world->value : 1;
  } else {
    p.world_size = world_size;
    if (world_size > 1 && env_world && env_world->value != world_size)
      throw ConfigError(cat("world_size ", world_size, " disagrees with the launcher's ", env_world->name, "=",
                            env_world->value, " (world_size 0 takes it from the launcher)"));
  }
  if (p.world_size < 1) throw ConfigError(cat("world_size must be at least 1, got ", p.world_size));
  if (p.world_size == 1) {
    p.rank = 0;
  } else {
    const auto env_rank = launcher("RANK", "SLURM_PROCID");
    if (rank < 0) {
      p.rank = env_rank ? env_rank->value : 0;
    } else {
      p.rank = rank;
      if (env_rank && env_rank->value != rank)
        throw ConfigError(cat("rank ", rank, " disagrees with the launcher's ", env_rank->name, "=", env_rank->value,
                              " (rank -1 takes it from the launcher)"));
    }
  }
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

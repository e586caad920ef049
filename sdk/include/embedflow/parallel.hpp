// Where this process sits in a data-parallel job. torch.train (world_size, rank) and core.shard
// read their parameters through this one function, so the two always agree:
//   world_size 0  reads WORLD_SIZE (torchrun's), else SLURM_NTASKS (srun's), else 1;
//   rank -1       reads RANK, else SLURM_PROCID, else 0; an explicit world_size > 1 or rank that disagrees throws;
//   a single process is rank 0 whatever RANK says (a scheduler may set it for other reasons).
// Throws ConfigError for a variable that is not an integer, a world below 1, or a rank outside
// [0, world_size).
#pragma once

#include <cstdint>

namespace embedflow {

class NodeTypeBuilder;
class Params;

struct ParallelPlace {
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
};

ParallelPlace resolve_parallel_place(std::int64_t world_size, std::int64_t rank);

// The rows [first, last) of a batch of `rows` that `place`'s rank trains on: [rows r / W,
// rows (r+1) / W). torch.train slices with it and core.shard too, so both give a rank the same rows.
struct RowRange {
  std::int64_t first = 0, last = 0;
};
RowRange rank_rows(std::int64_t rows, const ParallelPlace& place);

// Sharding at the source, the same pair of parameters on every node that takes it (as DALI's
// num_shards / shard_id): `shard_world_size` (default 1: off, every record; 0: WORLD_SIZE) and
// `shard_rank` (default -1: RANK). Off by default, so a graph run under torchrun still reads
// everything unless it asks; a node that shards selects its records with rank_rows, so the ranks'
// shares are disjoint, contiguous in the node's own order, and their union is the whole set.
void add_shard_params(NodeTypeBuilder& builder);
// The place those parameters name, through resolve_parallel_place (ConfigError when invalid).
ParallelPlace shard_place(const Params& params);

}  // namespace embedflow

// Shared by the image readers image.idx_reader and image.files_reader: which images a reader
// keeps (classes and limit), their order each epoch, which of its positions a rank emits when the
// reader is sharded, and the output schema and batching checks of the params both declare
// (shuffle, epochs, batch_size, drop_last, shard_world_size, shard_rank).
#pragma once

#include <cstdint>
#include <vector>

#include <embedflow/parallel.hpp>

#include "core/classes.hpp"

namespace embedflow::image {

// Appends `row` to `selected` when `label` passes `classes` and fewer than `limit` rows are
// selected (limit 0: no limit).
void select_row(std::vector<std::int64_t>& selected, std::int64_t row, std::int64_t label, const ClassSet& classes,
                std::int64_t limit);

// The order of epoch `epoch`: `selected` as it is, or shuffled when `shuffle`, seeded by the
// node seed and the epoch.
std::vector<std::int64_t> epoch_order(const std::vector<std::int64_t>& selected, bool shuffle, std::uint64_t node_seed,
                                      std::int64_t epoch);

// One record of an epoch as a reader emits it: the global batch, positions [begin, end) of the
// epoch's order, and this rank's rows of it, positions [first, last) (the whole batch unsharded).
struct ReaderSlice {
  std::int64_t begin = 0, end = 0;
  std::int64_t first = 0, last = 0;
};

// Sharding at the source for the readers (shard_world_size W, shard_rank r, declared with the
// SDK's add_shard_params). With batch_size B > 0 every rank walks the unsharded epoch's global
// batches and takes rows rank_rows(B) of each, the rows core.shard behind an unsharded reader
// would pass, tagged unsharded_rows = B: every rank takes the same number of steps and the ranks'
// rows in rank order are the batch. Per record (batch_size 0) and as one table (-1) rank r takes
// positions rank_rows(N) of the epoch's order. Both readers plan their epochs here, so they split
// alike; a reader then reads or decodes only the positions of its slices.
class ReaderShard {
 public:
  explicit ReaderShard(const Params& p);  // batch_size, drop_last and the shard parameters
  // shard_world_size is not 1: batches carry unsharded_rows (even in a world of one from WORLD_SIZE).
  bool sharded() const { return sharded_; }
  const ParallelPlace& place() const { return place_; }
  // The records of epoch `epoch` over an order of n positions: batch_size > 0, one slice per batch
  // (the last partial one unless drop_last); 0 and -1, one slice holding this rank's positions. A
  // sharded batch of fewer rows than ranks is a DataError naming the epoch and the batch.
  std::vector<ReaderSlice> plan(std::int64_t n, std::int64_t epoch) const;
  // Records this rank emits per epoch of n positions (for NodeContext::set_expected_items).
  std::uint64_t records(std::int64_t n) const;
  // The unsharded_rows field of a sharded batch record of `rows` rows cut from `s`: the global
  // batch's planned size, end - begin.
  static Array unsharded_rows(std::int64_t rows, const ReaderSlice& s);

 private:
  ParallelPlace place_;
  bool sharded_ = false, drop_last_ = false;
  std::int64_t batch_ = 0;
};

// Check-hook helper: reports batch_size, epochs, drop_last and shard_world_size values that do
// not go together.
void check_reader_batching(SchemaContext& c);

// The reader's output schema: id, label, epoch and image [height, width, channels] (u8), each
// with the leading dim batch_size gives (none per image, B per batch, a fixed B with drop_last,
// N for the one table record). A height or width not above 0 is unknown: symbol H or W. Sharded
// (shard_world_size not 1), a batch is a rank's share, whose size is a symbol even with
// drop_last, and carries unsharded_rows: i64[B] as core.shard's batches do; with on_bad_image: skip
// (image.files_reader) also skipped_rows: i64[B], the rank's rows of the batch left out as unreadable.
PortSchema reader_schema(const Params& p, std::int64_t height, std::int64_t width, std::int64_t channels);

}  // namespace embedflow::image

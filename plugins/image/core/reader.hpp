// Shared by the image readers image.idx_reader and image.files_reader: which images a reader
// keeps (classes and limit), their order each epoch, and the output schema and batching checks
// of the params both declare (shuffle, epochs, batch_size, drop_last).
#pragma once

#include <cstdint>
#include <vector>

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

// Check-hook helper: reports batch_size, epochs and drop_last values that do not go together.
void check_reader_batching(SchemaContext& c);

// The reader's output schema: id, label, epoch and image [height, width, channels] (u8), each
// with the leading dim batch_size gives (none per image, B per batch, a fixed B with drop_last,
// N for the one table record). A height or width not above 0 is unknown: symbol H or W.
// `sharded`: a rank's share of each batch, whose size is a symbol even with drop_last.
PortSchema reader_schema(const Params& p, std::int64_t height, std::int64_t width, std::int64_t channels,
                         bool sharded = false);

}  // namespace embedflow::image

// Per-anchor sampling over a SamplerIndex (private to the geo core): the positives and negatives
// of every photo of a block of whole locations, so each ball or ring query is shared by the
// location's photos. PairSampler::run hands blocks to threads and the results to its sink.
#pragma once

#include <atomic>
#include <cstdint>

#include "pair_index.hpp"
#include "pair_sampler.hpp"

namespace embedflow::geo {

// One block's rows and counts, merged into SamplerStats in block order.
struct BlockOut {
  PairRows rows;
  std::int64_t anchors = 0, with_pos = 0, pos = 0, neg = 0, fallbacks = 0;
};

// Samples the anchors of locations [u_begin, u_end) into `out`, adding the rows it draws to
// `drawn`; stops early once `drawn` passes c.max_rows (when that is > 0).
void sample_location_block(const SamplerConfig& c, const SamplerIndex& m, std::uint32_t u_begin, std::uint32_t u_end,
                           std::atomic<std::uint64_t>& drawn, BlockOut& out);

}  // namespace embedflow::geo

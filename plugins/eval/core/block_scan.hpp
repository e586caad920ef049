// The gallery scan kNN search and retrieval evaluation share: one block of queries scored
// against the gallery a block of items at a time, so the score matrix never exists whole.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "distance.hpp"
#include "arena_loop.hpp"

namespace embedflow::evalcore {

// Scores queries [q0, q1) against gallery blocks of `gallery_block` items (into `buffer`, at
// least (q1 - q0) x gallery_block floats) and, for each block [g0, g1), calls
// scan(s, row, g0, g1) for every query q0 + s from up to `threads` threads; row[j - g0] is the
// score of gallery item j.
template <class Scan>
void scan_gallery_blocks(const BlockScorer& scorer, std::int64_t q0, std::int64_t q1, std::int64_t gallery_block,
                         std::vector<float>& buffer, int threads, Scan&& scan) {
  const std::int64_t gallery_rows = scorer.gallery().rows;
  for (std::int64_t g0 = 0; g0 < gallery_rows; g0 += gallery_block) {
    const std::int64_t g1 = std::min(gallery_rows, g0 + gallery_block);
    scorer.compute(q0, q1, g0, g1, buffer.data(), gallery_block, threads);
    arena_for(q1 - q0, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t s = b; s < e; ++s) scan(s, buffer.data() + s * gallery_block, g0, g1);
    });
  }
}

}  // namespace embedflow::evalcore

// The index PairSampler draws from, built once per photo set (private to the geo core): the kept
// photos grouped by location in the KD-tree's numbering, their columns by position, and the
// extra orders that turn each pair constraint into a contiguous range (by user and time within a
// location, all photos by time, time-lapse sequences).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pair_sampler.hpp"
#include "spatial_index.hpp"

namespace embedflow::geo {

struct SamplerIndex {
  LocationGroups groups;  // kept photos by (location, time)
  std::unique_ptr<LocationIndex> index;
  // Per position p in groups.order:
  std::vector<std::int64_t> time, id;
  std::vector<std::int32_t> user;
  std::vector<std::uint32_t> loc;
  // Within each location, positions by (user, time).
  std::vector<std::uint32_t> by_user, by_user_inv;
  // All photos by time, for open-ended negative pools: what a draw needs sits in one cache line,
  // since these draws land anywhere in memory.
  struct NegEntry {
    double lat, lon, cos_lat;  // radians
    std::int64_t id;
  };
  std::vector<NegEntry> by_time;
  std::vector<std::int64_t> by_time_t;
  // Time-lapse sequences: members by (sequence, time); seq_of[p] = -1 outside any.
  std::vector<std::int32_t> seq_of;
  std::vector<std::uint32_t> seq_members, seq_start;
};

// Applies the date window and duplicate removal to `photos` and fills `m`, counting what it
// drops in `stats`. Runs inside the caller's task arena. Throws DataError for a photo id seen
// twice or an unreadable image file.
void build_pair_index(const PhotoSet& photos, const SamplerConfig& c, SamplerIndex& m, SamplerStats& stats);

}  // namespace embedflow::geo

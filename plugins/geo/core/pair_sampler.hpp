// Per-anchor sampling of similar / dissimilar photo pairs from geotags (P_{r+,r-} sets).
//
// For every anchor photo: up to k_pos positives within positive_radius_m (or, in time-lapse
// mode, frames of the same time-lapse sequence) and up to k_neg negatives at least
// negative_min_m away (and at most negative_max_m when a ring is asked for), each drawn
// uniformly without replacement from all photos that meet the constraints. Enumerating all pairs
// is infeasible (10^8+ pairs within 10 m), so:
//   - photos are grouped by identical coordinates and the KD-tree holds unique locations; a
//     ball/ring query runs once per location and is shared by all its photos;
//   - within a location photos are ordered by time, and a second order by (user, time), so each
//     constraint (time window, same user) is a contiguous range found by binary search: a
//     10k-photo hot spot costs O(group * k log), never O(group^2);
//   - open-ended negatives (beyond r-) are drawn by rejection from the time window, exact
//     enumeration being the fallback when nearly every photo lies within r-.
// Each anchor draws from its own generator seeded from (seed, photo id), so the output does not
// depend on the thread count; blocks are handed to the sink in location order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "embedflow/parallel.hpp"

namespace embedflow::geo {

// The columns the sampler needs, in input order.
struct PhotoSet {
  std::vector<std::int64_t> id;
  std::vector<double> lat, lon;
  std::vector<std::int64_t> time;
  std::vector<std::int32_t> user;   // interned user ids
  std::vector<std::string> path;    // optional image paths (duplicate-file removal)
  std::size_t size() const { return id.size(); }
};

enum class UserRule { any, same, different };
enum class PositiveMode { radius, timelapse };

struct SamplerConfig {
  double positive_radius_m = 10;
  double negative_min_m = 2000;
  double negative_max_m = 0;        // > 0: ring negatives negative_min_m <= d <= negative_max_m
  int k_pos = 4;
  int k_neg = 4;
  // Dataset window [date_from, date_to) in unix seconds; applies to every photo.
  std::int64_t date_from = INT64_MIN, date_to = INT64_MAX;
  // Pair constraints relative to the anchor, on positives and negatives alike.
  bool same_month = false, same_year = false;
  std::int64_t max_time_gap_s = 0;  // 0: none
  UserRule positive_user = UserRule::any;
  PositiveMode mode = PositiveMode::radius;
  std::int64_t timelapse_gap_s = 3600;  // consecutive frames at most this far apart
  int timelapse_min_frames = 100;
  // Duplicates: same coordinates, same user, times within duplicate_time_s (-1 disables).
  std::int64_t duplicate_time_s = 1;
  bool duplicate_files = true;          // identical file contents when paths are given
  std::string image_root;               // prefix for relative paths
  // > 0: drawing more pair rows (positives plus negatives, over all anchors) is a DataError.
  // Rows are counted as each anchor's are drawn and sampling stops once past the bound, so at
  // most max_rows plus one anchor's rows per thread are ever held: a huge k on a large photo set
  // fails instead of holding every pair. 0: no bound.
  std::uint64_t max_rows = 0;
  std::uint64_t seed = 0;
  // Data-parallel share: this rank samples the anchors at index positions rank_rows(kept, place)
  // of the location-ordered photos (whole locations: a location belongs to the rank holding its
  // first photo), against the whole index. Each anchor draws from (seed, id), so the ranks' rows,
  // concatenated in rank order, are exactly the rows of one unsharded run.
  ParallelPlace place;
  int threads = 0;                      // <= 0: all hardware threads
  std::size_t block_anchors = 1 << 15;  // anchors per output block
  // Draw from a query's superset by rejection when KD-tree leaves straddling the region's
  // boundary hold at most this fraction of it; above it they are resolved point by point.
  // Either way the draw is exact and uniform: this only trades query cost against rejections.
  double unsure_fraction = 0.5;
};

// One block of output rows: one row per (anchor, partner); label 1 similar, 0 dissimilar.
struct PairRows {
  std::vector<std::int64_t> anchor, other, label;
  std::vector<double> distance_m;
  std::size_t size() const { return anchor.size(); }
};

// Triplets (anchor, positive_i, negative_i) for i < min(#pos, #neg) of each anchor.
struct TripletRows {
  std::vector<std::int64_t> anchor, positive, negative;
  std::vector<double> positive_m, negative_m;
  std::size_t size() const { return anchor.size(); }
};

struct SamplerStats {
  std::int64_t input = 0, outside_dates = 0, duplicates = 0, duplicate_files = 0, kept = 0;
  std::int64_t unique_locations = 0, timelapse_sequences = 0, timelapse_frames = 0;
  std::int64_t anchors = 0, anchors_with_positive = 0, positives = 0, negatives = 0;
  std::int64_t negative_fallbacks = 0;  // anchors whose negatives needed exact enumeration
  double build_seconds = 0, sample_seconds = 0;
};

class PairSampler {
 public:
  // Applies the date window and duplicate removal and builds the index. Throws ConfigError on
  // inconsistent settings and DataError on unreadable image files.
  PairSampler(const PhotoSet& photos, SamplerConfig config);
  ~PairSampler();
  // Samples every anchor. `sink` receives each anchor's positives then negatives; anchors
  // without a positive emit nothing. Blocks arrive in a deterministic order.
  void run(const std::function<void(PairRows&&)>& sink, const std::function<bool()>& stop = {});
  const SamplerStats& stats() const { return stats_; }
  const SamplerConfig& config() const { return config_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  SamplerConfig config_;
  SamplerStats stats_;
};

TripletRows to_triplets(const PairRows& rows);

// Maps user names to dense ids, in first-seen order.
class UserInterner {
 public:
  std::int32_t intern(const std::string& name);
  std::size_t size() const { return ids_.size(); }
 private:
  std::unordered_map<std::string, std::int32_t> ids_;
};

}  // namespace embedflow::geo

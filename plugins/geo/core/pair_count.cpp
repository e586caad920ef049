#include "pair_count.hpp"

#include <algorithm>
#include <cmath>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>

#include "embedflow/error.hpp"
#include "geodesy.hpp"
#include "spatial_index.hpp"

namespace embedflow::geo {

namespace {

struct Cell {
  std::int64_t key;  // row * kStride + col
  std::uint32_t begin, end;
};
constexpr std::int64_t kStride = std::int64_t(1) << 31;

}  // namespace

PairCount count_pairs_within(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg,
                             double radius_m, int threads, bool per_point) {
  if (radius_m < 0) throw ConfigError(cat("geo: radius ", radius_m, " m must be >= 0"));
  if (radius_m > LocationIndex::kMaxQueryRadiusM)
    throw ConfigError(cat("geo: radius ", radius_m, " m exceeds the supported ", LocationIndex::kMaxQueryRadiusM, " m"));
  PairCount result;
  result.radius_m = radius_m;
  result.points = static_cast<std::int64_t>(lat_deg.size());
  if (lat_deg.empty()) return result;

  tbb::task_arena arena(threads > 0 ? threads : tbb::task_arena::automatic);
  arena.execute([&] {
    const LocationGroups groups = group_by_location(lat_deg, lon_deg, {});
    const std::size_t U = groups.size();
    result.unique_locations = static_cast<std::int64_t>(U);
    auto [mn_lat, mx_lat] = std::minmax_element(groups.lat.begin(), groups.lat.end());
    auto [mn_lon, mx_lon] = std::minmax_element(groups.lon.begin(), groups.lon.end());
    const Projection proj = Projection::fit(*mn_lat, *mx_lat, *mn_lon, *mx_lon);

    // A cell side of at least the widest projected radius keeps every partner in the 3x3 block.
    const double cell = std::max(radius_m * proj.ratio_high + 1e-6, 1e-3);
    struct Loc {
      std::int64_t key;
      double x, y, lat, lon, cos_lat;
      std::int64_t mult;
    };
    std::vector<Loc> locs(U);
    tbb::parallel_for(std::size_t(0), U, [&](std::size_t u) {
      const double x = proj.x(groups.lon[u]), y = proj.y(groups.lat[u]);
      const auto col = static_cast<std::int64_t>(std::floor(x / cell)) + kStride / 2;
      const auto row = static_cast<std::int64_t>(std::floor(y / cell)) + kStride / 2;
      const double la = groups.lat[u] * kDegToRad;
      locs[u] = {row * kStride + col, x, y, la, groups.lon[u] * kDegToRad, std::cos(la), groups.count(u)};
    });
    // Keep the location index u reachable for per-point output.
    std::vector<std::uint32_t> perm(U);
    for (std::size_t u = 0; u < U; ++u) perm[u] = static_cast<std::uint32_t>(u);
    tbb::parallel_sort(perm.begin(), perm.end(), [&](std::uint32_t a, std::uint32_t b) {
      return locs[a].key < locs[b].key || (locs[a].key == locs[b].key && a < b);
    });
    std::vector<Loc> sorted(U);
    for (std::size_t i = 0; i < U; ++i) sorted[i] = locs[perm[i]];
    std::vector<Loc>().swap(locs);

    const double sure_in = radius_m * proj.ratio_low;
    const double sure_in_sq = sure_in * sure_in;
    const double out_r = radius_m * proj.ratio_high + 1e-6;
    const double out_sq = out_r * out_r;
    const double h_r = hav_of_distance(radius_m);

    // within[i]: photos within the radius of sorted location i, itself included.
    std::vector<std::int64_t> within(U, 0);
    auto lower = [&](std::int64_t key) {
      return static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), key,
                                                       [](const Loc& l, std::int64_t k) { return l.key < k; }) -
                                      sorted.begin());
    };
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, U, 4096), [&](const tbb::blocked_range<std::size_t>& r) {
      std::size_t i = r.begin();
      while (i < r.end()) {
        // All locations of one cell share the candidate ranges.
        const std::int64_t key = sorted[i].key;
        std::size_t cell_end = i;
        while (cell_end < U && sorted[cell_end].key == key) ++cell_end;
        std::pair<std::size_t, std::size_t> ranges[3];
        for (int dr = -1; dr <= 1; ++dr) {
          const std::int64_t base = key + dr * kStride;
          ranges[dr + 1] = {lower(base - 1), lower(base + 2)};
        }
        const std::size_t stop = std::min(cell_end, r.end());
        for (std::size_t a = i; a < stop; ++a) {
          const Loc& p = sorted[a];
          std::int64_t count = 0;
          for (const auto& [b0, b1] : ranges) {
            for (std::size_t b = b0; b < b1; ++b) {
              const Loc& q = sorted[b];
              const double dx = p.x - q.x, dy = p.y - q.y;
              const double d2 = dx * dx + dy * dy;
              if (d2 <= sure_in_sq) {
                count += q.mult;
              } else if (d2 <= out_sq &&
                         haversine_term(p.lat, p.lon, p.cos_lat, q.lat, q.lon, q.cos_lat) <= h_r) {
                count += q.mult;
              }
            }
          }
          within[a] = count;
        }
        i = stop;
      }
    });

    std::int64_t ordered = 0;  // sum over photos of (within - 1) = 2 * pairs
    for (std::size_t i = 0; i < U; ++i) ordered += sorted[i].mult * (within[i] - 1);
    result.pairs = ordered / 2;

    if (per_point) {
      result.per_point.assign(lat_deg.size(), 0);
      std::vector<std::int64_t> by_location(U);
      for (std::size_t i = 0; i < U; ++i) by_location[perm[i]] = within[i];
      for (std::size_t p = 0; p < lat_deg.size(); ++p) result.per_point[p] = by_location[groups.location_of[p]];
    }
  });
  return result;
}

PairCount count_pairs_brute_force(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg,
                                  double radius_m) {
  PairCount result;
  result.radius_m = radius_m;
  const std::size_t n = lat_deg.size();
  result.points = static_cast<std::int64_t>(n);
  result.per_point.assign(n, 1);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      if (haversine_m(lat_deg[i], lon_deg[i], lat_deg[j], lon_deg[j]) <= radius_m) {
        ++result.pairs;
        ++result.per_point[i];
        ++result.per_point[j];
      }
  return result;
}

}  // namespace embedflow::geo

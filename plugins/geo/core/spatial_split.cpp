#include "spatial_split.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "embedflow/error.hpp"
#include "geodesy.hpp"
#include "spatial_index.hpp"

namespace embedflow::geo {
namespace {

// splitmix64's finaliser: a cell's part must not follow its neighbours' (seed, x, y) patterns.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double cell_uniform(std::uint64_t seed, std::int64_t cx, std::int64_t cy) {
  std::uint64_t h = mix(seed);
  h = mix(h ^ static_cast<std::uint64_t>(cx));
  h = mix(h ^ static_cast<std::uint64_t>(cy));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// The photos of `members` marked `to` when any photo of `others` lies within `metres`.
void buffer_near(const std::vector<double>& lat, const std::vector<double>& lon, const std::vector<std::uint32_t>& others,
                 const std::vector<std::uint32_t>& members, double metres, std::vector<SplitPart>& part,
                 std::int64_t& marked) {
  if (others.empty() || members.empty()) return;
  // One tree point per distinct location (photo venues repeat coordinates).
  const LocationGroups g = group_by_location(lat, lon, {}, others);
  const LocationIndex index(g.lat, g.lon);
  // The index's projection is fitted to `others`, whose latitude span a member may lie outside;
  // its distortion bound then no longer covers the member, so the query asks for a wider ball
  // and each candidate is decided by its exact great-circle distance.
  const double wide = kBufferQueryWidening * metres + 1.0;
  std::vector<std::uint32_t> found;
  for (const std::uint32_t i : members) {
    index.query(lat[i], lon[i], 0.0, wide, found);
    for (const std::uint32_t t : found)
      if (index.distance_m(t, lat[i], lon[i]) <= metres) {
        part[i] = SplitPart::buffer;
        ++marked;
        break;
      }
  }
}

}  // namespace

std::vector<SplitPart> spatial_split(const std::vector<double>& lat, const std::vector<double>& lon,
                                     const SpatialSplitOptions& o, SpatialSplitSummary* summary) {
  if (!(o.cell_m > 0)) throw ConfigError(cat("cell_m must be > 0 metres, got ", o.cell_m));
  if (!(o.buffer_m >= 0)) throw ConfigError(cat("buffer_m must be >= 0 metres, got ", o.buffer_m));
  if (o.buffer_m > kMaxBufferM) throw ConfigError(cat("buffer_m ", o.buffer_m, " is beyond the supported ", kMaxBufferM, " m"));
  if (!(o.validation_fraction >= 0 && o.test_fraction >= 0 && o.validation_fraction + o.test_fraction <= 1))
    throw ConfigError(cat("validation_fraction ", o.validation_fraction, " and test_fraction ", o.test_fraction,
                          " must be >= 0 and sum to at most 1"));
  const std::size_t n = lat.size();
  std::vector<SplitPart> part(n, SplitPart::train);
  SpatialSplitSummary s;
  if (n > 0) {
    const auto [min_lat, max_lat] = std::minmax_element(lat.begin(), lat.end());
    const auto [min_lon, max_lon] = std::minmax_element(lon.begin(), lon.end());
    const Projection proj = Projection::fit(*min_lat, *max_lat, *min_lon, *max_lon);
    std::set<std::pair<std::int64_t, std::int64_t>> cells[3];
    std::vector<std::uint32_t> members[3];
    for (std::size_t i = 0; i < n; ++i) {
      const auto cx = static_cast<std::int64_t>(std::floor(proj.x(lon[i]) / o.cell_m));
      const auto cy = static_cast<std::int64_t>(std::floor(proj.y(lat[i]) / o.cell_m));
      const double u = cell_uniform(o.seed, cx, cy);
      const SplitPart p = u < o.test_fraction                         ? SplitPart::test
                          : u < o.test_fraction + o.validation_fraction ? SplitPart::validation
                                                                      : SplitPart::train;
      part[i] = p;
      cells[static_cast<int>(p)].emplace(cx, cy);
      members[static_cast<int>(p)].push_back(static_cast<std::uint32_t>(i));
    }
    for (int k = 0; k < 3; ++k) s.cells[k] = static_cast<std::int64_t>(cells[k].size());
    const auto& test = members[static_cast<int>(SplitPart::test)];
    auto& validation = members[static_cast<int>(SplitPart::validation)];
    auto& train = members[static_cast<int>(SplitPart::train)];
    buffer_near(lat, lon, test, validation, o.buffer_m, part, s.buffer_from_validation);
    validation.erase(std::remove_if(validation.begin(), validation.end(), [&](std::uint32_t i) { return part[i] == SplitPart::buffer; }),
                     validation.end());
    // Train keeps its distance from the test photos and from the validation photos kept.
    std::vector<std::uint32_t> held_out = test;
    held_out.insert(held_out.end(), validation.begin(), validation.end());
    buffer_near(lat, lon, held_out, train, o.buffer_m, part, s.buffer_from_train);
  }
  for (const SplitPart p : part) ++s.photos[static_cast<int>(p)];
  if (summary) *summary = s;
  return part;
}

}  // namespace embedflow::geo

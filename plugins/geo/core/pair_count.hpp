// Exact counting of photo pairs within a great-circle radius, by grid counting rather than pair
// enumeration: photos are grouped by identical coordinates (a hot spot of m photos contributes
// m*(m-1)/2 pairs in O(1)), unique locations are bucketed into square cells of side >= the
// radius in the local projection, and each location is compared only with the locations of its
// 3x3 cell block. The projection's distortion bound decides most candidates without
// trigonometry; the rest get the exact haversine test.
#pragma once

#include <cstdint>
#include <vector>

namespace embedflow::geo {

struct PairCount {
  double radius_m = 0;
  std::int64_t points = 0;
  std::int64_t unique_locations = 0;
  std::int64_t pairs = 0;              // unordered pairs {i, j}, i != j, with distance <= radius
  std::vector<std::int64_t> per_point; // per photo: photos within radius, itself included
                                       // (what sklearn's query_radius(count_only=True) returns)
};

// threads <= 0: all hardware threads. per_point is filled only when `per_point` is true.
PairCount count_pairs_within(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg,
                             double radius_m, int threads, bool per_point);

// O(n^2) reference on the same distance function, for tests.
PairCount count_pairs_brute_force(const std::vector<double>& lat_deg, const std::vector<double>& lon_deg,
                                  double radius_m);

}  // namespace embedflow::geo
